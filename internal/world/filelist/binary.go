package filelist

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
)

// Encode and Decode are the binary form of a list (a stored world's
// .files): what a world is loaded from instead of the list in .world.json.
// Its form: the line
// "apodex-files-v1", the count (uvarint), then per file the path's length
// (uvarint) and bytes, the 32 bytes of its sha256 and its size (uvarint).
// A 100,000-file list is 7 MB, streamed and decoded without a string
// per path, where .world.json's is 16 MB of JSON to parse.
const listMagic = "apodex-files-v1\n"

// Encode is the binary form of files.
func Encode(files []File) []byte {
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

// ErrDamaged: Decode was given something Encode did not make.
var ErrDamaged = errors.New("filelist: the binary list is damaged")

// Decode is the list raw (Encode's form) holds (see Read).
func Decode(raw []byte) ([]File, error) {
	return Read(bytes.NewReader(raw), int64(len(raw)))
}

// Read is Decode of the size bytes r holds (a stored world's .files),
// streamed through a 64 KiB buffer: the list is never held whole beside
// what it decodes to, and its paths are kept in strings of about 256 KiB
// (no string per path, no copy of the whole file).
func Read(r io.Reader, size int64) ([]File, error) {
	src := &sourceErr{r: r}
	br := bufio.NewReaderSize(src, 64<<10)
	fail := func() error {
		if src.err != nil {
			return src.err
		}
		return ErrDamaged // read, but not Encode's (short, malformed, or more)
	}
	magic := make([]byte, len(listMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != listMagic {
		return nil, fail()
	}
	count, err := binary.ReadUvarint(br)
	if err != nil || count > uint64(size)/(1+32+1) { // an entry takes 34 bytes at least
		return nil, fail()
	}
	files := make([]File, count)
	// The paths of files[from:] go into chunk, each ending at ends[i].
	chunk := make([]byte, 0, chunkSize)
	ends := make([]int, 0, 1024)
	from := 0
	flush := func(to int) {
		s, start := string(chunk), 0
		for i, end := range ends {
			files[from+i].Path = s[start:end]
			start = end
		}
		chunk, ends, from = chunk[:0], ends[:0], to
	}
	left := size - int64(len(listMagic)) // bytes of r not yet read, for the bounds
	for i := range files {
		n, err := binary.ReadUvarint(br)
		if err != nil || n > uint64(left) {
			return nil, fail()
		}
		if len(chunk)+int(n) > cap(chunk) {
			flush(i)
			if int(n) > cap(chunk) {
				chunk = make([]byte, 0, n)
			}
		}
		if _, err := io.ReadFull(br, chunk[len(chunk):len(chunk)+int(n)]); err != nil {
			return nil, fail()
		}
		chunk = chunk[:len(chunk)+int(n)]
		ends = append(ends, len(chunk))
		left -= int64(n)
		if _, err := io.ReadFull(br, files[i].SHA256[:]); err != nil {
			return nil, fail()
		}
		sz, err := binary.ReadUvarint(br)
		if err != nil || sz > 1<<62 {
			return nil, fail()
		}
		files[i].Bytes = int64(sz)
	}
	flush(len(files))
	if _, err := br.ReadByte(); err != io.EOF {
		return nil, fail()
	}
	return files, nil
}

// sourceErr keeps the first error of r other than its end.
type sourceErr struct {
	r   io.Reader
	err error
}

func (s *sourceErr) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
	return n, err
}
