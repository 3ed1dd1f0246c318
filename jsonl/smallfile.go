package jsonl

import (
	"errors"
	"io"
	"io/fs"
	"os"
)

// readSmallFile reads at most limit bytes of the small file at path (a
// marker, a record, a lease), opened like every store file (no symbolic
// links, regular files only). found is false, with no error, only when the
// file is absent (ENOENT); every other failure is returned as it is.
func (s *Store) readSmallFile(path string, limit int64) (body []byte, found bool, err error) {
	f, _, err := s.openFile(path, os.O_RDONLY)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		}
		return nil, false, err
	}
	defer f.Close()
	body, err = io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, true, err
	}
	return body, true, nil
}
