package main

// The drawing. It is plain Go: each shape is a predicate on the unit
// square, sampled on a grid inside every pixel (more samples on small
// images, and only where a pixel straddles an edge on large ones) for
// smooth edges.

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
)

// Style says what an image is for.
type Style int

const (
	// AppIcon is the bundle's colour icon: the mark on a rounded square.
	AppIcon Style = iota
	// Template is a menu-bar template image: the mark in black on
	// transparency; macOS tints it for light and dark menu bars.
	Template
	// Tray is the colour mark alone on transparency, for trays that show
	// images as they are (Linux StatusNotifierItem hosts).
	Tray
)

// Image is one file to write.
type Image struct {
	Path      string // slash-separated, relative to Resources/icons
	Size      int    // width and height in pixels
	Style     Style
	Attention bool // with the badge dot that says something waits for the user
}

// Images lists every file under Resources/icons that Draw makes: the
// .iconset iconutil turns into Carapace.icns (its names are the ones
// iconutil requires), the menu-bar template images at 22 and 44 pixels
// (1x and 2x of the menu bar's 22-point height), and the tray images.
func Images() []Image {
	var out []Image
	for _, pt := range []int{16, 32, 128, 256, 512} {
		name := fmt.Sprintf("Carapace.iconset/icon_%dx%d", pt, pt)
		out = append(out,
			Image{Path: name + ".png", Size: pt, Style: AppIcon},
			Image{Path: name + "@2x.png", Size: 2 * pt, Style: AppIcon})
	}
	for _, a := range []struct {
		name string
		on   bool
	}{{"Carapace", false}, {"CarapaceAttention", true}} {
		out = append(out,
			Image{Path: "menubar/" + a.name + "Template.png", Size: 22, Style: Template, Attention: a.on},
			Image{Path: "menubar/" + a.name + "Template@2x.png", Size: 44, Style: Template, Attention: a.on},
			Image{Path: "tray/" + a.name + ".png", Size: 64, Style: Tray, Attention: a.on})
	}
	return out
}

// Encode draws im and encodes it as PNG.
func Encode(im Image) ([]byte, error) {
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&buf, Draw(im.Size, im.Style, im.Attention)); err != nil {
		return nil, fmt.Errorf("encode %s: %w", im.Path, err)
	}
	return buf.Bytes(), nil
}

// Colours of the colour images.
var (
	backTop    = rgb(0x12, 0x5e, 0x6a) // the rounded square, top
	backBottom = rgb(0x0b, 0x35, 0x42) // and bottom
	shell      = rgb(0xf2, 0xb8, 0x4b) // the shield
	shellDark  = rgb(0xb9, 0x7a, 0x1f) // the seams on the tray image
	badge      = rgb(0xe5, 0x48, 0x4d) // the attention dot
	black      = rgb(0, 0, 0)
)

// Draw returns the mark at size×size pixels in style, with the attention
// badge if attention.
func Draw(size int, style Style, attention bool) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	// A seam stays at least about a pixel wide, or it vanishes on small
	// images.
	seam := math.Max(0.045, 1.3/float64(size))
	// Below about 40 pixels the seams to the rim turn to mud: small
	// images keep only the middle plate.
	radial := size >= 40
	var layers []layer
	switch style {
	case AppIcon:
		layers = []layer{
			{fill: func(_, y float64) rgba { return mix(backTop, backBottom, y) }, in: roundedSquare},
			{fill: solid(shell), in: shieldWithSeams(0.16, 0.84, 0.16, 0.86, seam, radial)},
		}
	case Template:
		layers = []layer{{fill: solid(black), in: shieldWithSeams(0.06, 0.94, 0.04, 0.98, seam, radial)}}
	case Tray:
		layers = []layer{
			{fill: solid(shellDark), in: shield(0.06, 0.94, 0.04, 0.98)},
			{fill: solid(shell), in: shieldWithSeams(0.06, 0.94, 0.04, 0.98, seam, radial)},
		}
	}
	if attention {
		// The badge sits at the top right; a transparent ring separates
		// it from the shield so that it reads as a dot in a template image.
		const cx, cy, r = 0.79, 0.21, 0.19
		ring := r + math.Max(0.06, 1.5/float64(size))
		for i := range layers {
			layers[i].in = minus(layers[i].in, disc(cx, cy, ring))
		}
		fill := solid(badge)
		if style == Template {
			fill = solid(black)
		}
		layers = append(layers, layer{fill: fill, in: disc(cx, cy, r)})
	}
	render(img, layers)
	return img
}

// shape reports whether a point of the unit square (x right, y down) is
// inside.
type shape func(x, y float64) bool

// layer is a shape and its colour; layers are painted in order.
type layer struct {
	fill func(x, y float64) rgba
	in   shape
}

// rgba is a colour with straight (not premultiplied) components in [0,1].
type rgba struct{ r, g, b, a float64 }

func rgb(r, g, b uint8) rgba {
	return rgba{float64(r) / 255, float64(g) / 255, float64(b) / 255, 1}
}

func solid(c rgba) func(x, y float64) rgba { return func(_, _ float64) rgba { return c } }

// mix blends a into b by t in [0,1].
func mix(a, b rgba, t float64) rgba {
	return rgba{a.r + (b.r-a.r)*t, a.g + (b.g-a.g)*t, a.b + (b.b-a.b)*t, 1}
}

// minus is a without b.
func minus(a, b shape) shape { return func(x, y float64) bool { return a(x, y) && !b(x, y) } }

// disc is the disc of radius r around (cx, cy).
func disc(cx, cy, r float64) shape {
	return func(x, y float64) bool { return (x-cx)*(x-cx)+(y-cy)*(y-cy) <= r*r }
}

// roundedSquare is the app icon's plate: macOS icons leave about a tenth
// of the canvas free on each side and round the corners.
func roundedSquare(x, y float64) bool {
	const lo, hi, r = 0.098, 0.902, 0.18
	if x < lo || x > hi || y < lo || y > hi {
		return false
	}
	cx := math.Min(math.Max(x, lo+r), hi-r)
	cy := math.Min(math.Max(y, lo+r), hi-r)
	return (x-cx)*(x-cx)+(y-cy)*(y-cy) <= r*r
}

// shield is a heater shield in the box [x0,x1]×[y0,y1]: a flat top with
// rounded corners, straight sides down to 45 % of its height, then sides
// that narrow to a point at the bottom.
func shield(x0, x1, y0, y1 float64) shape {
	cx, hw := (x0+x1)/2, (x1-x0)/2
	h := y1 - y0
	r := 0.18 * hw
	mid := y0 + 0.45*h
	return func(x, y float64) bool {
		if y < y0 || y > y1 {
			return false
		}
		dx := math.Abs(x - cx)
		if y <= mid {
			if dx > hw {
				return false
			}
			if y < y0+r && dx > hw-r { // a rounded top corner
				ex, ey := dx-(hw-r), y-(y0+r)
				return ex*ex+ey*ey <= r*r
			}
			return true
		}
		t := (y - mid) / (y1 - mid)
		return dx <= hw*(1-t*t)
	}
}

// shieldWithSeams is shield with the shell's seams cut out: a hexagonal
// plate in the middle and, if radial, a seam from each of its corners to
// the rim.
func shieldWithSeams(x0, x1, y0, y1, seam float64, radial bool) shape {
	outer := shield(x0, x1, y0, y1)
	cx, cy := (x0+x1)/2, y0+0.42*(y1-y0)
	r := 0.24 * (x1 - x0) // the plate's circumradius
	apothem := r * math.Sqrt(3) / 2
	// The plate has a corner at the top and one at the bottom; the
	// normals of its sides are at 0°, 60° and 120°.
	var normals, corners [6][2]float64
	for i := range 3 {
		a := float64(i) * math.Pi / 3
		normals[i] = [2]float64{math.Cos(a), math.Sin(a)}
	}
	for i := range 6 {
		a := -math.Pi/2 + float64(i)*math.Pi/3
		corners[i] = [2]float64{math.Cos(a), math.Sin(a)}
	}
	half := seam / 2
	return func(x, y float64) bool {
		if !outer(x, y) {
			return false
		}
		px, py := x-cx, y-cy
		d := 0.0 // the hexagon's "radius" through (px, py)
		for _, n := range normals[:3] {
			d = math.Max(d, math.Abs(px*n[0]+py*n[1]))
		}
		if math.Abs(d-apothem) <= half {
			return false // on the plate's outline
		}
		if d < apothem || !radial {
			return true
		}
		for _, c := range corners {
			vx, vy := px-c[0]*r, py-c[1]*r
			along := vx*c[0] + vy*c[1]
			if along >= 0 && math.Abs(vx*c[1]-vy*c[0]) <= half {
				return false // on a seam running out from this corner
			}
		}
		return true
	}
}

// render paints layers into img. Images up to 64 pixels are sampled 8×8
// in every pixel; larger ones 4×4, and only in pixels whose corners and
// centre disagree about some layer (elsewhere the centre decides).
func render(img *image.NRGBA, layers []layer) {
	size := img.Bounds().Dx()
	n, adaptive := 8, false
	if size > 64 {
		n, adaptive = 4, true
	}
	px := 1 / float64(size)
	for j := range size {
		for i := range size {
			x0, y0 := float64(i)*px, float64(j)*px
			var c rgba
			for _, l := range layers {
				cov := coverage(l.in, x0, y0, px, n, adaptive)
				if cov == 0 {
					continue
				}
				f := l.fill(x0+px/2, y0+px/2)
				c = over(rgba{f.r, f.g, f.b, f.a * cov}, c)
			}
			img.SetNRGBA(i, j, c.nrgba())
		}
	}
}

// coverage is the share of the pixel at (x0, y0), side px, inside s.
func coverage(s shape, x0, y0, px float64, n int, adaptive bool) float64 {
	if adaptive {
		c := s(x0+px/2, y0+px/2)
		if s(x0, y0) == c && s(x0+px, y0) == c && s(x0, y0+px) == c && s(x0+px, y0+px) == c {
			if c {
				return 1
			}
			return 0
		}
	}
	in := 0
	step := px / float64(n)
	for v := range n {
		for u := range n {
			if s(x0+(float64(u)+0.5)*step, y0+(float64(v)+0.5)*step) {
				in++
			}
		}
	}
	return float64(in) / float64(n*n)
}

// over composites a over b.
func over(a, b rgba) rgba {
	out := a.a + b.a*(1-a.a)
	if out == 0 {
		return rgba{}
	}
	blend := func(ca, cb float64) float64 { return (ca*a.a + cb*b.a*(1-a.a)) / out }
	return rgba{blend(a.r, b.r), blend(a.g, b.g), blend(a.b, b.b), out}
}

// nrgba rounds c to 8 bits a channel; a transparent pixel is all zero.
func (c rgba) nrgba() color.NRGBA {
	q := func(v float64) uint8 { return uint8(math.Round(math.Min(math.Max(v, 0), 1) * 255)) }
	if q(c.a) == 0 {
		return color.NRGBA{}
	}
	return color.NRGBA{q(c.r), q(c.g), q(c.b), q(c.a)}
}
