//go:build !(darwin && cgo)

package keychain_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/carapace-dev/carapace/keychain"
)

// TestDefault checks that, without the macOS Keychain, Default is the file
// store rooted at the directory it is given.
func TestDefault(t *testing.T) {
	dir := t.TempDir()
	s := keychain.Default(dir)
	if err := s.Set("github", "token", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "plugins", "github", "token")); err != nil {
		t.Errorf("Default did not store in files under its directory: %v", err)
	}
}
