// Package icons holds Carapace's icons, drawn by cmd/appicon (never
// edit the PNGs by hand: change the drawing and run go generate here):
//
//   - Carapace.iconset: the bundle icon; `make app-bundle` turns it into
//     Carapace.app/Contents/Resources/Carapace.icns with iconutil.
//   - menubar: template images for the macOS menu bar (black on
//     transparency, tinted by macOS for light and dark menu bars), plain
//     and with the attention badge, at 22 and 44 pixels.
//   - tray: the colour mark for trays that show images as they are.
//
// The menu-bar and tray images are embedded here for the app.
package icons

import "embed"

//go:generate go run ../../cmd/appicon -out .

// FS holds every image above, by the paths listed there
// ("menubar/CarapaceTemplate.png", ...).
//
//go:embed Carapace.iconset menubar tray
var FS embed.FS

// MenuBarTemplate is the menu-bar template image at 44 pixels. fyne.io's
// systray (SetTemplateIcon) shows it at 16×16 points, so the 44-pixel
// image is the one that stays sharp on a Retina menu bar.
//
//go:embed menubar/CarapaceTemplate@2x.png
var MenuBarTemplate []byte

// MenuBarAttentionTemplate is MenuBarTemplate with the badge dot that
// says something waits for the user.
//
//go:embed menubar/CarapaceAttentionTemplate@2x.png
var MenuBarAttentionTemplate []byte

// Tray is the colour mark at 64 pixels: the regular (non-template) image
// for SetTemplateIcon, and the tray icon where templates do not apply.
//
//go:embed tray/Carapace.png
var Tray []byte

// TrayAttention is Tray with the badge dot.
//
//go:embed tray/CarapaceAttention.png
var TrayAttention []byte
