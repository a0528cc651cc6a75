//go:build darwin && cgo

package keychain

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"
)

// TestKeychainRoundTrip stores, reads, lists, overwrites and deletes a
// credential in the real login Keychain, under a plugin name of its own.
// It runs only on macOS (the macOS CI workflow), never on Linux.
func TestKeychainRoundTrip(t *testing.T) {
	s, ok := Default(t.TempDir()).(*KeychainStore)
	if !ok {
		t.Fatalf("Default on darwin with cgo is %T, want *KeychainStore", Default(""))
	}
	plugin := fmt.Sprintf("carapace-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	const key = "token"
	t.Cleanup(func() { s.Delete(plugin, key) })

	if _, err := s.Get(plugin, key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get before Set: %v, want ErrNotFound", err)
	}
	for _, v := range [][]byte{[]byte("first secret"), []byte("second, longer secret")} {
		if err := s.Set(plugin, key, v); err != nil {
			t.Fatalf("Set: %v", err)
		}
		got, err := s.Get(plugin, key)
		if err != nil || !bytes.Equal(got, v) {
			t.Fatalf("Get = %q, %v; want %q", got, err, v)
		}
	}
	if keys, err := s.List(plugin); err != nil || !slices.Equal(keys, []string{key}) {
		t.Errorf("List = %q, %v; want [%s]", keys, err, key)
	}
	if plugins, err := s.Plugins(); err != nil || !slices.Contains(plugins, plugin) {
		t.Errorf("Plugins = %q, %v; want it to contain %s", plugins, err, plugin)
	}
	if err := s.Delete(plugin, key); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Get(plugin, key); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(plugin, key); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Delete: %v, want ErrNotFound", err)
	}
	if err := s.Set("../x", key, []byte("v")); !errors.Is(err, ErrBadPlugin) {
		t.Errorf("Set with a bad plugin name: %v, want ErrBadPlugin", err)
	}
}
