//go:build !(darwin && cgo)

package keychain

// Default returns the credential store of this platform: here, without
// the macOS Keychain (not darwin, or built without cgo), the file store
// rooted at credentialsDir ($CARAPACE_HOME/credentials).
func Default(credentialsDir string) Store {
	return NewFileStore(credentialsDir)
}
