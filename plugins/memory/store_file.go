package memory

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
)

// prepareFile returns path made absolute, after making sure that none of
// SQLite's companion files (-wal, -shm, -journal) is anything but a regular
// file and that path names a regular file, creating an empty one, 0600, if
// there is none.
func prepareFile(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("memory: open %s: %w", path, err)
	}
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		fi, err := os.Lstat(abs + suffix)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("memory: open %s: %w", abs, err)
		}
		if err := checkRegular(abs+suffix, fi); err != nil {
			return "", err
		}
	}
	// O_EXCL: never through a symbolic link, never over an existing file.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		if err := f.Close(); err != nil {
			return "", fmt.Errorf("memory: create %s: %w", abs, err)
		}
	case errors.Is(err, fs.ErrExist):
		fi, err := os.Lstat(abs)
		if err != nil {
			return "", fmt.Errorf("memory: open %s: %w", abs, err)
		}
		if err := checkRegular(abs, fi); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("memory: create %s: %w", abs, err)
	}
	return abs, nil
}

// checkRegular refuses a symbolic link or any other non-regular file.
func checkRegular(path string, fi fs.FileInfo) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("memory: %s is a symbolic link; refusing to open it (move the database itself there)", path)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("memory: %s is not a regular file", path)
	}
	return nil
}

// dsn returns the go-sqlite3 data source name of the file at the absolute
// path with params: a SQLite URI, so that mode= applies, with the path
// escaped so that '?', '#' and '%' in it stay part of it. go-sqlite3 reads
// the parameters starting with '_'; SQLite reads mode and ignores the rest.
func dsn(abs string, params map[string]string) string {
	q := url.Values{}
	for k, v := range params {
		q.Set(k, v)
	}
	return "file:" + (&url.URL{Path: abs}).EscapedPath() + "?" + q.Encode()
}
