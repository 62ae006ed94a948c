package world

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// listFile (<world>/.files, not hashed) is the stored world's file list
// in binary: what Get reads instead of the list in .world.json, which
// stays there for people and older readers. Its form: the line
// "apodex-files-v1", the count (uvarint), then per file the path's length
// (uvarint) and bytes, the 32 bytes of its sha256 and its size (uvarint).
// A 100,000-file list is 7 MB read in one go and decoded without a
// string per path, where .world.json's is 16 MB of JSON to parse. Like
// .world.json, it is trusted only as far as the id: Intact hashes the list
// as read, with world.yaml, and refuses a world whose id it does not give.
const listFile = ".files"

const listMagic = "apodex-files-v1\n"

// encodeList is listFile's content for files.
func encodeList(files []File) []byte {
	var b bytes.Buffer
	b.WriteString(listMagic)
	b.Write(binary.AppendUvarint(nil, uint64(len(files))))
	var n [binary.MaxVarintLen64]byte
	for _, f := range files {
		b.Write(n[:binary.PutUvarint(n[:], uint64(len(f.Path)))])
		b.WriteString(f.Path)
		b.Write(f.SHA256[:])
		b.Write(n[:binary.PutUvarint(n[:], uint64(f.Bytes))])
	}
	return b.Bytes()
}

var errList = errors.New("world: " + listFile + " is damaged")

// decodeList is the file list raw holds; its paths share one string.
func decodeList(raw []byte) ([]File, error) {
	r, ok := bytes.CutPrefix(raw, []byte(listMagic))
	if !ok {
		return nil, errList
	}
	count, k := binary.Uvarint(r)
	if k <= 0 || count > uint64(len(r)) {
		return nil, errList
	}
	r = r[k:]
	files := make([]File, count)
	var paths strings.Builder
	paths.Grow(len(r) - int(count)*(32+2)) // at most
	ends := make([]int, count)
	for i := range files {
		n, k := binary.Uvarint(r)
		if k <= 0 || n > uint64(len(r)-k) || len(r)-k-int(n) < 32 {
			return nil, errList
		}
		paths.Write(r[k : k+int(n)])
		ends[i] = paths.Len()
		r = r[k+int(n):]
		copy(files[i].SHA256[:], r)
		size, k2 := binary.Uvarint(r[32:])
		if k2 <= 0 || size > 1<<62 {
			return nil, errList
		}
		files[i].Bytes = int64(size)
		r = r[32+k2:]
	}
	if len(r) != 0 {
		return nil, errList
	}
	all, start := paths.String(), 0
	for i, end := range ends {
		files[i].Path = all[start:end]
		start = end
	}
	return files, nil
}

// readStored decodes the stored world in dir's .world.json and file list
// into w: the list from listFile when there is one (the rest of
// .world.json is read from its two ends, around the list), else from
// .world.json (a world stored before listFile existed).
func readStored(dir string, w *World) error {
	raw, err := os.ReadFile(filepath.Join(dir, listFile))
	if errors.Is(err, os.ErrNotExist) {
		return readInfo(filepath.Join(dir, infoFile), w)
	} else if err != nil {
		return err
	}
	files, err := decodeList(raw)
	if err != nil {
		return err
	}
	if err := readInfoAround(filepath.Join(dir, infoFile), w); err != nil {
		return err
	}
	w.Files = files
	return nil
}

// readInfoAround decodes .world.json but its file list, reading only its
// head (up to the list) and its tail (after it): the store writes the list
// last but for "bytes", a number, so the list ends at the file's last ']'.
// A file not in that form is read whole (readInfo).
func readInfoAround(path string, w *World) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	const end = 4 << 10
	tail := make([]byte, min(fi.Size(), end))
	if _, err := f.ReadAt(tail, fi.Size()-int64(len(tail))); err != nil {
		return err
	}
	win := &window{r: f, buf: make([]byte, windowSize)}
	head, ok := infoHead(win)
	i := bytes.LastIndexByte(tail, ']')
	if ok && i >= 0 && json.Unmarshal(append(append(head, "null"...), tail[i+1:]...), w) == nil {
		return nil
	}
	*w = World{seals: w.seals}
	return readInfo(path, w)
}
