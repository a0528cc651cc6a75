//go:build darwin && cgo

package keychain

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	gokeychain "github.com/keybase/go-keychain"
)

// Service is the Keychain service of every Carapace credential.
const Service = "dev.carapace.credentials"

// KeychainStore keeps credentials in the user's default (login) Keychain
// as generic password items: service Service, account "<plugin>/<key>"
// (unambiguous, since neither name may contain '/'), label
// "Carapace <plugin> <key>". It is a thin layer over
// github.com/keybase/go-keychain; macOS decides which processes may read
// an item and may ask the user.
//
// This file is built only on macOS with cgo. On the project's Linux
// machines it is type-checked (go run ./cmd/darwincheck), not run;
// keychain_darwin_test.go exercises it against the real Keychain on macOS
// (the macOS CI workflow).
type KeychainStore struct{}

var _ Store = (*KeychainStore)(nil)

// NewKeychainStore returns the Keychain store.
func NewKeychainStore() *KeychainStore { return &KeychainStore{} }

// Default returns the credential store of this platform: on macOS with
// cgo, the login Keychain; credentialsDir is not used.
func Default(credentialsDir string) Store { return NewKeychainStore() }

// String says where the store keeps credentials.
func (*KeychainStore) String() string {
	return "the macOS Keychain (service " + Service + ")"
}

// account is the Keychain account of a credential.
func account(plugin, key string) string { return plugin + "/" + key }

// query matches one credential, or every Carapace credential if plugin is
// empty.
func query(plugin, key string) gokeychain.Item {
	q := gokeychain.NewItem()
	q.SetSecClass(gokeychain.SecClassGenericPassword)
	q.SetService(Service)
	if plugin != "" {
		q.SetAccount(account(plugin, key))
	}
	return q
}

// Get returns the value of plugin's key.
func (*KeychainStore) Get(plugin, key string) ([]byte, error) {
	if err := checkNames(plugin, key); err != nil {
		return nil, err
	}
	q := query(plugin, key)
	q.SetMatchLimit(gokeychain.MatchLimitOne)
	q.SetReturnData(true)
	res, err := gokeychain.QueryItem(q)
	if err != nil {
		return nil, fmt.Errorf("read credential %s of plugin %s from the Keychain: %w", key, plugin, err)
	}
	if len(res) == 0 {
		return nil, notFound(plugin, key)
	}
	if len(res[0].Data) > MaxValueSize {
		return nil, fmt.Errorf("credential %s of plugin %s in the Keychain is larger than the limit of %d bytes", key, plugin, MaxValueSize)
	}
	return res[0].Data, nil
}

// Set adds the item, or updates it if it exists.
func (*KeychainStore) Set(plugin, key string, value []byte) error {
	if err := checkNames(plugin, key); err != nil {
		return err
	}
	if err := checkValue(value); err != nil {
		return err
	}
	label := "Carapace " + plugin + " " + key
	item := query(plugin, key)
	item.SetLabel(label)
	item.SetData(value)
	err := gokeychain.AddItem(item)
	if errors.Is(err, gokeychain.ErrorDuplicateItem) {
		update := gokeychain.NewItem()
		update.SetLabel(label)
		update.SetData(value)
		err = gokeychain.UpdateItem(query(plugin, key), update)
	}
	if err != nil {
		return fmt.Errorf("store credential %s of plugin %s in the Keychain: %w", key, plugin, err)
	}
	return nil
}

// Delete removes the item.
func (*KeychainStore) Delete(plugin, key string) error {
	if err := checkNames(plugin, key); err != nil {
		return err
	}
	err := gokeychain.DeleteItem(query(plugin, key))
	if errors.Is(err, gokeychain.ErrorItemNotFound) {
		return notFound(plugin, key)
	}
	if err != nil {
		return fmt.Errorf("delete credential %s of plugin %s from the Keychain: %w", key, plugin, err)
	}
	return nil
}

// List returns plugin's keys, sorted.
func (k *KeychainStore) List(plugin string) ([]string, error) {
	if err := CheckPlugin(plugin); err != nil {
		return nil, err
	}
	var keys []string
	err := k.each(func(p, key string) {
		if p == plugin {
			keys = append(keys, key)
		}
	})
	return sortedUnique(keys), err
}

// Plugins returns the plugins with at least one key, sorted.
func (k *KeychainStore) Plugins() ([]string, error) {
	var plugins []string
	err := k.each(func(p, _ string) { plugins = append(plugins, p) })
	return sortedUnique(plugins), err
}

// each calls f for every Carapace item whose account is a valid
// "<plugin>/<key>", reading attributes only, never data.
func (*KeychainStore) each(f func(plugin, key string)) error {
	q := query("", "")
	q.SetMatchLimit(gokeychain.MatchLimitAll)
	q.SetReturnAttributes(true)
	res, err := gokeychain.QueryItem(q)
	if err != nil {
		return fmt.Errorf("list credentials in the Keychain: %w", err)
	}
	for _, r := range res {
		if plugin, key, ok := strings.Cut(r.Account, "/"); ok && checkNames(plugin, key) == nil {
			f(plugin, key)
		}
	}
	return nil
}

// sortedUnique sorts s and drops duplicates.
func sortedUnique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}
