// Package atomicfile replaces files whole: a reader sees the old file or
// the new one, never a part, and a crash leaves one of the two.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces path with data, mode mode: it writes a temporary file in
// the same folder, syncs it and renames it into place. The folder must
// exist. On failure the temporary file is removed and path is untouched.
func Write(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}
