// Package keychain stores the credentials of plugins on the host: API
// tokens, passwords and the like, set with `carapace auth set` and read by
// a plugin's handler through plugin.Services.ReadCredential. Credentials
// never enter an agent's container.
//
// There are two stores behind one interface. On macOS (darwin, built with
// cgo) Default returns the login Keychain: generic password items of the
// service "dev.carapace.credentials". Everywhere else (and on darwin
// without cgo) it returns a FileStore: one file per credential under
// $CARAPACE_HOME/credentials, mode 0600 in 0700 directories, written
// atomically, and read only when nothing about the file could let another
// user or another plugin have put it there.
//
// A credential is named by its plugin (kebab-case, see CheckPlugin) and a
// key (a simple file name, see CheckKey). Both are checked before a store
// touches the disk or the Keychain. Values are opaque bytes of 1 to
// MaxValueSize bytes; no error or log message of this package contains one.
package keychain

import (
	"errors"
	"fmt"
	"regexp"
)

// Store keeps credentials, each named by a plugin and a key. Every method
// checks the plugin name and the key first (CheckPlugin, CheckKey) and
// fails with an error wrapping ErrBadPlugin or ErrBadKey without touching
// storage. A Store is safe for concurrent use.
type Store interface {
	// Get returns the value of plugin's key; ErrNotFound when it is unset.
	Get(plugin, key string) ([]byte, error)
	// Set stores value (1 to MaxValueSize bytes) as plugin's key,
	// replacing any previous value.
	Set(plugin, key string, value []byte) error
	// Delete removes plugin's key; ErrNotFound when it is unset.
	Delete(plugin, key string) error
	// List returns the keys set for plugin, sorted; none is not an error.
	List(plugin string) ([]string, error)
	// Plugins returns the plugins with at least one key set, sorted.
	Plugins() ([]string, error)
}

// MaxValueSize is the largest credential value, in bytes. Stores refuse to
// write or read a larger one.
const MaxValueSize = 64 << 10

// Errors of the stores and of the name checks.
var (
	// ErrNotFound: the plugin has no credential of that key.
	ErrNotFound = errors.New("credential not set")
	// ErrBadKey: the key could not safely name a credential.
	ErrBadKey = errors.New(`keys are 1-128 characters of A-Z, a-z, 0-9, '.', '_' and '-', other than "." and without ".." (for example token or api_key)`)
	// ErrBadPlugin: the plugin name is not a valid plugin name.
	ErrBadPlugin = errors.New("plugin names are kebab-case: 1-64 characters of a-z, 0-9 and '-', starting with a letter (for example github or google-calendar)")
)

// maxKeyLen and maxPluginLen bound the names.
const (
	maxKeyLen    = 128
	maxPluginLen = 64
)

var pluginRE = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

// CheckKey reports whether key can name a credential: 1 to 128 bytes of
// [A-Za-z0-9._-], neither "." nor "..", and no ".." inside. Such a key is
// a simple file name: it has no '/', '\\' or NUL byte and cannot climb out
// of a directory.
func CheckKey(key string) error {
	ok := len(key) >= 1 && len(key) <= maxKeyLen && key != "."
	for i := 0; ok && i < len(key); i++ {
		c := key[i]
		ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
		if c == '.' && i > 0 && key[i-1] == '.' {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("key %q: %w", key, ErrBadKey)
	}
	return nil
}

// CheckPlugin reports whether name is a valid plugin name: kebab-case
// (^[a-z][a-z0-9]*(-[a-z0-9]+)*$), at most 64 bytes.
func CheckPlugin(name string) error {
	if len(name) > maxPluginLen || !pluginRE.MatchString(name) {
		return fmt.Errorf("plugin %q: %w", name, ErrBadPlugin)
	}
	return nil
}

// checkNames checks a plugin name and a key.
func checkNames(plugin, key string) error {
	if err := CheckPlugin(plugin); err != nil {
		return err
	}
	return CheckKey(key)
}

// checkValue checks the size of a value to be stored; the message never
// contains the value.
func checkValue(value []byte) error {
	switch {
	case len(value) == 0:
		return errors.New("empty credential value")
	case len(value) > MaxValueSize:
		return fmt.Errorf("credential value of %d bytes is larger than the limit of %d bytes", len(value), MaxValueSize)
	}
	return nil
}

// notFound wraps ErrNotFound with the credential's name.
func notFound(plugin, key string) error {
	return fmt.Errorf("credential %s of plugin %s: %w", key, plugin, ErrNotFound)
}
