//go:build !unix

package telegram

import (
	"errors"
	"os"
)

// LockFile is the name of the lock file in the data folder.
const LockFile = "telegram.lock"

// lock is not implemented off Unix: Carapace runs on Linux and macOS.
func lock(string) (*os.File, error) {
	return nil, errors.New("telegram: the plugin runs only on Linux and macOS (it needs flock)")
}

func unlock(*os.File) error { return nil }
