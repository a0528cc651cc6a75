// Command appicon draws the Carapace mark — a shield whose face is a
// turtle's shell: a hexagonal plate in the middle and seams to the rim —
// into the PNG images the menu-bar app and its macOS bundle need, and
// writes them under a directory, Resources/icons by default:
//
//	go run ./cmd/appicon [-out Resources/icons]
//
// (or go generate ./Resources/icons). Run it after changing the drawing
// (appicon.go), and commit what it writes: its test checks that the
// committed files are what Draw makes, so the pictures never drift from
// their source.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	out := flag.String("out", "Resources/icons", "the directory to write the images under")
	flag.Parse()
	if err := write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "appicon:", err)
		os.Exit(1)
	}
}

// write draws every image and writes it under dir.
func write(dir string) error {
	for _, im := range Images() {
		data, err := Encode(im)
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(im.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("create the directory of %s: %w", im.Path, err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", im.Path, err)
		}
	}
	return nil
}
