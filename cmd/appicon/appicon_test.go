package main

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"io/fs"
	"slices"
	"testing"

	"github.com/carapace-dev/carapace/Resources/icons"
)

// TestCommittedImagesAreDrawn checks that Resources/icons holds exactly
// the images Images lists, each decoding to the pixels Draw makes now:
// byte-for-byte where the PNG encoder agrees, and otherwise within the
// rounding that floating point may differ by between architectures (one
// sample of a pixel's 64). Regenerate with `go generate ./Resources/icons`.
func TestCommittedImagesAreDrawn(t *testing.T) {
	t.Parallel()
	var want []string
	for _, im := range Images() {
		want = append(want, im.Path)
		t.Run(im.Path, func(t *testing.T) {
			t.Parallel()
			committed, err := icons.FS.ReadFile(im.Path)
			if err != nil {
				t.Fatalf("not committed (go generate ./Resources/icons): %v", err)
			}
			fresh, err := Encode(im)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(committed, fresh) {
				return
			}
			got, err := png.Decode(bytes.NewReader(committed))
			if err != nil {
				t.Fatalf("decode the committed file: %v", err)
			}
			if got.Bounds() != image.Rect(0, 0, im.Size, im.Size) {
				t.Fatalf("committed image is %v, want %d×%d", got.Bounds(), im.Size, im.Size)
			}
			drawn := Draw(im.Size, im.Style, im.Attention)
			const tolerance = 255/64 + 1
			worst := 0
			for y := range im.Size {
				for x := range im.Size {
					a := color.NRGBAModel.Convert(got.At(x, y)).(color.NRGBA)
					b := drawn.NRGBAAt(x, y)
					for i, v := range []uint8{a.R, a.G, a.B, a.A} {
						worst = max(worst, absDiff(v, []uint8{b.R, b.G, b.B, b.A}[i]))
					}
				}
			}
			if worst > tolerance {
				t.Errorf("committed pixels differ from the drawing by up to %d levels (go generate ./Resources/icons)", worst)
			} else {
				t.Logf("committed file is not byte-identical, but its pixels are within %d levels of the drawing", worst)
			}
		})
	}
	var have []string
	err := fs.WalkDir(icons.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			have = append(have, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	slices.Sort(have)
	if !slices.Equal(have, want) {
		t.Errorf("Resources/icons holds %q, want exactly %q", have, want)
	}
}

// TestShapes checks what each style must look like, whatever the
// drawing's details: template images are black with alpha only, the app
// icon leaves its margins transparent, and the badge appears only on
// attention images.
func TestShapes(t *testing.T) {
	t.Parallel()
	for _, im := range Images() {
		img := Draw(im.Size, im.Style, im.Attention)
		opaque, partial := 0, 0
		for y := range im.Size {
			for x := range im.Size {
				c := img.NRGBAAt(x, y)
				switch {
				case c.A == 255:
					opaque++
				case c.A > 0:
					partial++
				}
				if im.Style == Template && c.A > 0 && (c.R|c.G|c.B) != 0 {
					t.Fatalf("%s: pixel (%d,%d) is %v; a template image is black", im.Path, x, y, c)
				}
			}
		}
		if opaque == 0 || partial == 0 || opaque+partial == im.Size*im.Size {
			t.Errorf("%s: %d opaque and %d partly transparent pixels of %d: want a shape with smooth edges on transparency",
				im.Path, opaque, partial, im.Size*im.Size)
		}
		if im.Style == AppIcon {
			if c := img.NRGBAAt(0, 0); c.A != 0 {
				t.Errorf("%s: corner pixel is %v, want transparent", im.Path, c)
			}
		}
		// The badge's centre: red in colour images with attention (never
		// red without), opaque black in templates with attention.
		c := img.NRGBAAt(int(0.79*float64(im.Size)), int(0.21*float64(im.Size)))
		switch {
		case im.Style != Template && (c == badge.nrgba()) != im.Attention:
			t.Errorf("%s: badge centre is %v, attention %v", im.Path, c, im.Attention)
		case im.Style == Template && im.Attention && c.A != 255:
			t.Errorf("%s: badge centre is %v, want opaque", im.Path, c)
		}
	}
}

// TestTemplateBadgeIsSeparate checks that in a template image, where
// colour cannot tell the badge from the shield, a transparent ring
// separates them.
func TestTemplateBadgeIsSeparate(t *testing.T) {
	t.Parallel()
	img := Draw(44, Template, true)
	// Walk from the badge's centre towards the shield's centre: opaque,
	// then a clear gap, then opaque again.
	const cx, cy, tx, ty = 0.79, 0.21, 0.5, 0.42
	seen := ""
	for i := range 100 {
		f := float64(i) / 100
		x, y := int((cx+(tx-cx)*f)*44), int((cy+(ty-cy)*f)*44)
		s := "#"
		if img.NRGBAAt(x, y).A < 64 {
			s = "."
		}
		if !bytes.HasSuffix([]byte(seen), []byte(s)) {
			seen += s
		}
	}
	if !bytes.HasPrefix([]byte(seen), []byte("#.#")) {
		t.Errorf("from the badge to the shield: %q, want opaque, clear, opaque", seen)
	}
}

func absDiff(a, b uint8) int {
	if a > b {
		return int(a - b)
	}
	return int(b - a)
}
