//go:build darwin && !cgo

package tray

import "github.com/carapace-dev/carapace/app/menu"

// fyne systray needs cgo on macOS: a build without it has no menu bar.
// These stand-ins let such a build compile (GOOS=darwin go vet, without a
// C toolchain); Run then only waits for Quit, and says why.

func runLoop(t *Tray) {
	t.log.Error("tray: this build has no menu bar: macOS builds of carapace-app need cgo (CGO_ENABLED=1)")
	t.onReady() // trees are still applied, to nothing
	<-t.quit
}

func quitLoop()         {}
func setTooltip(string) {}
func setTitle()         {}
func setBadge(string)   {}
func setIcon(menu.Icon) {}
func newView(t *Tray) view {
	v := &reconcileView{t: t}
	v.rec.b = nopBackend{}
	return v
}

// nopBackend shows nothing.
type nopBackend struct{}

func (nopBackend) add(handle, menu.Item) handle { return new(int) }
func (nopBackend) addSeparator(handle)          {}
func (nopBackend) update(handle, menu.Item)     {}
func (nopBackend) remove(handle)                {}
func (nopBackend) reset()                       {}
