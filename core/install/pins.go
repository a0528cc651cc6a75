package install

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/internal/atomicfile"
)

// Pin records the handler an installation put in place. The core starts a
// user plugin only when its handler still hashes to SHA256.
type Pin struct {
	// Name is the plugin's name, its folder under plugins/.
	Name string `json:"name"`
	// SHA256 is the lowercase hex SHA-256 of the installed handler.
	SHA256 string `json:"sha256"`
	// Source is the absolute folder the plugin was installed from.
	Source string `json:"source"`
	// Linked is true when plugins/<name> is a symbolic link to Source
	// (`carapace plugin install --link`), false when it is a copy.
	Linked bool `json:"linked"`
	// Installed is when the pin was written.
	Installed time.Time `json:"installed"`
}

// pinsFile is the layout of pins.json.
type pinsFile struct {
	Plugins map[string]Pin `json:"plugins"`
}

// maxPinsFile bounds the pins file LoadPins reads.
const maxPinsFile = 4 << 20

// LoadPins reads the pins of home h (home.Dir.Pins). A missing file means
// no pins: an empty map and no error. A pins file that is a symbolic link,
// or not a regular file, is an error: the core then starts no user plugin.
func LoadPins(h home.Dir) (map[string]Pin, error) {
	b, err := readLimited(h.Pins(), maxPinsFile)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]Pin{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read pins: %w", err)
	}
	var pf pinsFile
	if err := json.Unmarshal(b, &pf); err != nil {
		return nil, fmt.Errorf("read pins %s: %w (reinstall the plugins, or fix or delete the file)", h.Pins(), err)
	}
	if pf.Plugins == nil {
		pf.Plugins = map[string]Pin{}
	}
	for name, p := range pf.Plugins {
		if p.Name == "" {
			p.Name = name
			pf.Plugins[name] = p
		}
	}
	return pf.Plugins, nil
}

// savePins writes pins to h.Pins() atomically (a temporary file in the
// same folder, synced, then renamed over it), mode 0600.
func savePins(h home.Dir, pins map[string]Pin) error {
	if pins == nil {
		pins = map[string]Pin{}
	}
	b, err := json.MarshalIndent(pinsFile{Plugins: pins}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode pins: %w", err)
	}
	if err := atomicfile.Write(h.Pins(), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write pins: %w", err)
	}
	return nil
}

// HashFile returns the lowercase hex SHA-256 of the regular file at path.
// It does not follow a symbolic link in the last element of path (earlier
// elements, such as a linked plugin folder, are followed), and refuses
// anything but a regular file.
//
// A hash checked before a file is executed says nothing about a file
// swapped in between: pinning guards against a handler changed after its
// installation, not against a process that can write the plugin folder
// while the core starts it.
func HashFile(path string) (string, error) {
	f, err := openNoFollow(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// readLimited reads at most limit bytes of the regular file at path
// (without following a final symbolic link), failing if it is larger.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := openNoFollow(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}
