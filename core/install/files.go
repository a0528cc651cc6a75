package install

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrSymlink is returned for a symbolic link where a plugin needs a file
// or folder of its own: installation never follows links out of a source.
var ErrSymlink = errors.New("is a symbolic link")

// ErrNotRegular is returned for something that should be a regular file
// and is not (a folder, a device, a FIFO).
var ErrNotRegular = errors.New("is not a regular file")

// openNoFollow opens the regular file at path for reading. A symbolic link
// as the last element of path is refused; so is anything but a regular
// file (O_NONBLOCK keeps a FIFO from blocking the open).
func openNoFollow(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
				return nil, fmt.Errorf("%s %w", path, ErrSymlink)
			}
		}
		return nil, err
	}
	if err := checkRegular(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkRegular fails unless f is a regular file.
func checkRegular(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s %w", f.Name(), ErrNotRegular)
	}
	return nil
}

// openAt opens name, an entry of the folder dir, without following a
// symbolic link: flags are added to O_NOFOLLOW|O_CLOEXEC. The result is
// named dir's name joined with name.
func openAt(dir *os.File, name string, flags int) (*os.File, error) {
	path := filepath.Join(dir.Name(), name)
	rc, err := dir.SyscallConn()
	if err != nil {
		return nil, err
	}
	var fd int
	var oerr error
	err = rc.Control(func(dfd uintptr) {
		for {
			fd, oerr = unix.Openat(int(dfd), name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if oerr != unix.EINTR {
				return
			}
		}
	})
	if err != nil {
		return nil, err
	}
	if oerr != nil {
		if oerr == unix.ELOOP || (flags&unix.O_DIRECTORY != 0 && oerr == unix.ENOTDIR && isSymlinkAt(dir, name)) {
			return nil, fmt.Errorf("%s %w", path, ErrSymlink)
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: oerr}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// isSymlinkAt reports whether name in dir is a symbolic link.
func isSymlinkAt(dir *os.File, name string) bool {
	fi, err := os.Lstat(filepath.Join(dir.Name(), name))
	return err == nil && fi.Mode()&os.ModeSymlink != 0
}

// openFileAt opens the regular file name in dir for reading, refusing a
// symbolic link and anything but a regular file.
func openFileAt(dir *os.File, name string) (*os.File, error) {
	f, err := openAt(dir, name, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	if err := checkRegular(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// openDirAt opens the folder name in dir, refusing a symbolic link.
func openDirAt(dir *os.File, name string) (*os.File, error) {
	return openAt(dir, name, unix.O_RDONLY|unix.O_DIRECTORY)
}

// lockDir takes an exclusive advisory lock on the folder at path, so that
// two installations or removals never interleave, and returns its release.
func lockDir(path string) (func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) {
		for {
			lerr = unix.Flock(int(fd), unix.LOCK_EX)
			if lerr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		f.Close()
		return nil, err
	}
	if lerr != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, lerr)
	}
	// Closing the descriptor releases the lock.
	return func() { f.Close() }, nil
}
