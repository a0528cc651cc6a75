// Command gen writes the Carapace icons (package appicon) as PNG files
// under a directory, Resources/icons by default:
//
//	go run ./internal/appicon/cmd/gen [-out Resources/icons]
//
// Run it after changing the drawing, and commit what it writes; the
// appicon test fails until the committed files match.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/carapace-dev/carapace/internal/appicon"
)

func main() {
	out := flag.String("out", "Resources/icons", "the directory to write the images under")
	flag.Parse()
	if err := write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// write draws every image and writes it under dir.
func write(dir string) error {
	for _, im := range appicon.Images() {
		data, err := appicon.Encode(im)
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
