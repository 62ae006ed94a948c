package jetstream

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// packDir writes a gzipped tar of dir's directories and regular files to
// w, leaving out top-level names in skip (mount points such as a run's
// world overlay). Links and special files are left out.
func packDir(w io.Writer, dir string, skip ...string) error {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		for _, s := range skip {
			if rel == s {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() && !info.IsDir() {
			return nil
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// unpackDir extracts a packDir archive into a fresh dst, through a
// temporary sibling renamed at the end, so dst is whole or absent. Names
// that would leave dst are refused; check (may be nil) judges the
// extracted tree before it becomes dst.
func unpackDir(r io.Reader, dst string, check func(dir string) error) error {
	tmp, err := os.MkdirTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".part-")
	if err != nil {
		return err
	}
	zr, err := gzip.NewReader(r)
	if err != nil {
		os.RemoveAll(tmp)
		return err
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			os.RemoveAll(tmp)
			return err
		}
		name := filepath.FromSlash(strings.TrimSuffix(hdr.Name, "/"))
		if !filepath.IsLocal(name) {
			os.RemoveAll(tmp)
			return fmt.Errorf("archive entry %q leaves the directory", hdr.Name)
		}
		p := filepath.Join(tmp, name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			err = writeFile(p, tr, os.FileMode(hdr.Mode).Perm())
		}
		if err != nil {
			os.RemoveAll(tmp)
			return err
		}
	}
	if check != nil {
		if err := check(tmp); err != nil {
			os.RemoveAll(tmp)
			return err
		}
	}
	os.Chmod(tmp, 0o755)
	if err := os.Rename(tmp, dst); err != nil {
		os.RemoveAll(tmp)
		if _, serr := os.Stat(dst); serr == nil {
			return nil // another fetch of the same object won
		}
		return err
	}
	return nil
}

func writeFile(p string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// putDir stores dir under name in os, unless it is there already.
func putDir(ctx context.Context, os_ jetstream.ObjectStore, name, dir string, skip ...string) error {
	if _, err := os_.GetInfo(ctx, name); err == nil {
		return nil
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(packDir(pw, dir, skip...)) }()
	_, err := os_.Put(ctx, jetstream.ObjectMeta{Name: name}, pr)
	pr.CloseWithError(err)
	return err
}

// getDir extracts object name into dst unless dst exists (see unpackDir
// for check).
func getDir(ctx context.Context, os_ jetstream.ObjectStore, name, dst string, check func(string) error) error {
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	res, err := os_.Get(ctx, name)
	if err != nil {
		return err
	}
	defer res.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return unpackDir(res, dst, check)
}
