package world

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/apodex/apodex/internal/world/filelist"
)

// listFile (<world>/.files, not hashed) is the stored world's file list in
// binary (filelist.Encode): what Get reads instead of the list in
// .world.json, which stays there for people and older readers. Like
// .world.json, it is trusted only as far as the id: Intact hashes the list
// as read, with world.yaml, and refuses a world whose id it does not give.
const listFile = ".files"

// decodeInfo decodes .world.json into w: its list by filelist's fast path
// when it has the store's form, else all of it by encoding/json.
func decodeInfo(raw []byte, w *World) error {
	if rest, files, ok := filelist.Split(raw); ok {
		if err := json.Unmarshal(rest, w); err != nil {
			return err
		}
		w.Files = files
		return nil
	}
	var info struct {
		*World
		Files filelist.List `json:"files"`
	}
	info.World = w
	if err := json.Unmarshal(raw, &info); err != nil {
		return err
	}
	w.Files = info.Files
	return nil
}

// readInfo decodes the .world.json at path into w, streaming it
// (filelist.Stream); anything but the store's form is decoded by
// decodeInfo from the whole file.
func readInfo(path string, w *World) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if rest, files, ok, err := filelist.Stream(f); err != nil {
		return err
	} else if ok {
		if err := json.Unmarshal(rest, w); err != nil {
			return err
		}
		w.Files = files
		return nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	raw, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	return decodeInfo(raw, w)
}

// readStored decodes the stored world in dir's .world.json and file list
// into w: the list from listFile when there is one (the rest of
// .world.json read from its two ends, around the list: filelist.Around),
// else from .world.json (a world stored before listFile existed).
func readStored(dir string, w *World) error {
	files, err := readList(filepath.Join(dir, listFile))
	if errors.Is(err, os.ErrNotExist) {
		return readInfo(filepath.Join(dir, infoFile), w)
	} else if err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(dir, infoFile))
	if err != nil {
		return err
	}
	defer f.Close()
	rest, ok, err := filelist.Around(f)
	if err != nil {
		return err
	}
	if !ok || json.Unmarshal(rest, w) != nil {
		*w = World{seals: w.seals}
		if err := readInfo(filepath.Join(dir, infoFile), w); err != nil {
			return err
		}
	}
	w.Files = files
	return nil
}

// readList streams the binary list at path (filelist.Read): a
// 100,000-file world's 7 MB are never held beside the list they decode to.
func readList(path string) ([]File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return filelist.Read(f, fi.Size())
}
