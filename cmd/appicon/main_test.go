package main

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/carapace-dev/carapace/Resources/icons"
)

// TestWrite writes the images into a new directory and finds each at its
// path, a PNG of its size. Whether the committed files match the drawing
// is TestCommittedImagesAreDrawn's business; a difference is logged here.
func TestWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := write(dir); err != nil {
		t.Fatal(err)
	}
	for _, im := range Images() {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(im.Path)))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(got))
		if err != nil {
			t.Fatalf("%s: %v", im.Path, err)
		}
		if cfg.Width != im.Size || cfg.Height != im.Size {
			t.Errorf("%s is %d×%d, want %d×%d", im.Path, cfg.Width, cfg.Height, im.Size, im.Size)
		}
		if committed, err := icons.FS.ReadFile(im.Path); err != nil || !bytes.Equal(got, committed) {
			t.Logf("%s: not byte-identical to the committed file (%v)", im.Path, err)
		}
	}
}
