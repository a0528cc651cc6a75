//go:build linux

// Command trayapp is the smallest fyne.io/systray program the desktop
// test host is tested with: a tray icon whose menu has a disabled status
// line, an entry, a submenu with an entry and a checkbox, a separator and
// Quit. It writes one line to stdout for each thing that happens, for the
// test to wait on:
//
//	ready                 the menu is built, the icon, title and tooltip set, and clicks are read
//	clicked approve       "Approve" was clicked (the status line then says "Status: approved")
//	clicked deny          "More" → "Deny" was clicked (the status line then says "Status: denied")
//	toggled true|false    "More" → "Start at login" was clicked, and is now on or off
//	clicked quit          "Quit" was clicked; the program then exits with status 0
//
// It runs only as a subprocess (desktoptest.Build, desktoptest.StartProcess):
// fyne.io/systray has global state and a data race the race detector
// reports, and must stay out of test binaries.
package main

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"

	"fyne.io/systray"
)

func main() {
	built, quit := make(chan struct{}), make(chan struct{})
	start, end := systray.RunWithExternalLoop(func() { buildMenu(quit); close(built) }, nil)
	start()
	<-built
	// fyne.io/systray v1.12.2 runs onReady on a goroutine beside its
	// export of the item, and a property set between its reading them for
	// the export and its keeping the exported ones is lost: they are set
	// once start has returned.
	systray.SetIcon(icon())
	systray.SetTitle("Trayapp")
	systray.SetTooltip("trayapp tooltip")
	fmt.Println("ready")
	<-quit
	end()
}

// buildMenu builds the menu and starts the loop that answers clicks; a
// click on Quit closes quit.
func buildMenu(quit chan<- struct{}) {
	status := systray.AddMenuItem("Status: idle", "what happened last")
	status.Disable()
	approve := systray.AddMenuItem("Approve", "")
	more := systray.AddMenuItem("More", "")
	deny := more.AddSubMenuItem("Deny", "")
	login := more.AddSubMenuItemCheckbox("Start at login", "", false)
	systray.AddSeparator()
	quitItem := systray.AddMenuItem("Quit", "")

	started := make(chan struct{})
	go func() {
		close(started)
		for {
			// fyne.io/systray drops a click that arrives while nobody
			// waits on its item's channel: this loop must always wait.
			select {
			case <-approve.ClickedCh:
				status.SetTitle("Status: approved")
				fmt.Println("clicked approve")
			case <-deny.ClickedCh:
				status.SetTitle("Status: denied")
				fmt.Println("clicked deny")
			case <-login.ClickedCh:
				if login.Checked() {
					login.Uncheck()
				} else {
					login.Check()
				}
				fmt.Println("toggled", login.Checked())
			case <-quitItem.ClickedCh:
				fmt.Println("clicked quit")
				close(quit)
				return
			}
		}
	}()
	<-started
}

// icon is a 22×22 PNG: a filled square.
func icon() []byte {
	img := image.NewNRGBA(image.Rect(0, 0, 22, 22))
	for y := range 22 {
		for x := range 22 {
			img.Set(x, y, color.NRGBA{R: 0x2e, G: 0x7d, B: 0x32, A: 0xff})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		fmt.Fprintln(os.Stderr, "trayapp: icon:", err)
		os.Exit(1)
	}
	return b.Bytes()
}
