//go:build linux

package tray

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/carapace-dev/carapace/app/desktoptest"
	"github.com/carapace-dev/carapace/app/menu"
)

// menuOnBus serves a dbusMenu on its own connection to a private bus and
// returns it, the connection's unique name and the clicks it reports.
func menuOnBus(t *testing.T, addr string) (*dbusMenu, string, <-chan menu.Click) {
	t.Helper()
	clicks := make(chan menu.Click, 16)
	m := newDBusMenu(nil, func(c menu.Click) { clicks <- c })
	conn := desktoptest.Connect(t, addr)
	if err := m.attach(conn); err != nil {
		t.Fatal(err)
	}
	return m, desktoptest.UniqueName(conn), clicks
}

// reader is a connection that reads and clicks the menu at service.
type reader struct {
	t       *testing.T
	conn    *dbus.Conn
	service string
	signals chan *dbus.Signal
}

func newReader(t *testing.T, addr, service string) *reader {
	t.Helper()
	r := &reader{t: t, conn: desktoptest.Connect(t, addr), service: service, signals: make(chan *dbus.Signal, 64)}
	r.conn.Signal(r.signals)
	if err := r.conn.AddMatchSignal(dbus.WithMatchSender(service), dbus.WithMatchInterface(menuInterface)); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *reader) call(method string, args ...any) *dbus.Call {
	return r.conn.Object(r.service, menuPath).Call(menuInterface+"."+method, dbus.FlagNoAutoStart, args...)
}

// layout reads the whole menu.
func (r *reader) layout() (uint32, layout) {
	r.t.Helper()
	var rev uint32
	var l layout
	if err := r.call("GetLayout", int32(0), int32(-1), []string{}).Store(&rev, &l); err != nil {
		r.t.Fatalf("GetLayout: %v", err)
	}
	return rev, l
}

// waitLayoutUpdated waits for the next LayoutUpdated.
func (r *reader) waitLayoutUpdated() {
	r.t.Helper()
	timeout := time.After(desktoptest.Timeout)
	for {
		select {
		case s := <-r.signals:
			if s.Name == menuInterface+".LayoutUpdated" {
				return
			}
		case <-timeout:
			r.t.Fatalf("no LayoutUpdated within %s", desktoptest.Timeout)
		}
	}
}

// click sends Event(id, "clicked").
func (r *reader) click(id int32) {
	r.t.Helper()
	if err := r.call("Event", id, "clicked", dbus.MakeVariant(int32(0)), uint32(0)).Err; err != nil {
		r.t.Fatalf("Event(%d): %v", id, err)
	}
}

// drawn draws a layout as menu.Tree.String draws the items (without the
// icon line and actions), from the properties as sent.
func drawn(l layout) string {
	var b strings.Builder
	var walk func(l layout, depth int)
	walk = func(l layout, depth int) {
		for _, v := range l.V2 {
			c := v.Value().([]any)
			child := layout{V0: c[0].(int32), V1: c[1].(map[string]dbus.Variant), V2: c[2].([]dbus.Variant)}
			b.WriteString(strings.Repeat("  ", depth))
			if child.V1["type"].Value() == "separator" {
				b.WriteString("---\n")
				continue
			}
			if tt, _ := child.V1["toggle-type"].Value().(string); tt == "checkmark" {
				if child.V1["toggle-state"].Value() == int32(1) {
					b.WriteString("[x] ")
				} else {
					b.WriteString("[ ] ")
				}
			}
			b.WriteString(strings.ReplaceAll(child.V1["label"].Value().(string), "__", "_"))
			if child.V1["enabled"].Value() == false {
				b.WriteString(" (off)")
			}
			b.WriteByte('\n')
			walk(child, depth+1)
		}
	}
	walk(l, 0)
	return b.String()
}

// want draws items as drawn draws a layout.
func want(items []menu.Item) string {
	var b strings.Builder
	menu.Tree{Items: items}.Walk(func(it menu.Item, depth int) {
		b.WriteString(strings.Repeat("  ", depth))
		switch {
		case it.Separator:
			b.WriteString("---\n")
			return
		case it.Checkable && it.Checked:
			b.WriteString("[x] ")
		case it.Checkable:
			b.WriteString("[ ] ")
		}
		b.WriteString(it.Title)
		if !it.Enabled {
			b.WriteString(" (off)")
		}
		b.WriteByte('\n')
	})
	return b.String()
}

// The menu served is the tree shown: its first read one level deep (for
// libdbusmenu-gtk3), then, announced, all of it; each change announced;
// an item keeps its entry id while it is shown, and a gone one's id is
// never given to another.
func TestDBusMenuLayout(t *testing.T) {
	addr := desktoptest.StartBus(t)
	m, service, _ := menuOnBus(t, addr)
	a, b := conf("aaaa"), conf("bbbb")
	a.Tool = "echo_confirm"
	s := menu.State{}.Apply(snapshot(a, b))
	tree := menu.Render(s, t0)
	m.show(tree.Items)
	r := newReader(t, addr, service)

	_, first := r.layout()
	for _, v := range first.V2 {
		if kids := v.Value().([]any)[2].([]dbus.Variant); len(kids) > 0 {
			t.Fatalf("the first layout goes deeper than one level: entry %v has children", v.Value().([]any)[0])
		}
	}
	r.waitLayoutUpdated()
	rev1, full := r.layout()
	if got, w := drawn(full), want(tree.Items); got != w {
		t.Fatalf("the menu served:\n%s\nwant:\n%s", got, w)
	}
	m.mu.Lock()
	before := maps.Clone(m.ids)
	m.mu.Unlock()

	// b is decided, a new one comes: a keeps its ids, b's go, c gets new
	// ones.
	c := conf("cccc")
	s = s.Apply(resolved(b)).Apply(requested(c))
	tree = menu.Render(s, t0)
	m.show(tree.Items)
	r.waitLayoutUpdated()
	rev2, full := r.layout()
	if rev2 <= rev1 {
		t.Errorf("revision %d after a change, was %d", rev2, rev1)
	}
	if got, w := drawn(full), want(tree.Items); got != w {
		t.Fatalf("after a change the menu served:\n%s\nwant:\n%s", got, w)
	}
	m.mu.Lock()
	gotA, gotB, gotC := m.ids["confirm/aaaa/approve"], m.ids["confirm/bbbb/approve"], m.ids["confirm/cccc/approve"]
	m.mu.Unlock()
	if gotA == 0 || gotA != before["confirm/aaaa/approve"] || gotB != 0 || gotC == 0 {
		t.Fatalf("approve ids: a %d (was %d), b %d, c %d; want a kept, b gone, c new", gotA, before["confirm/aaaa/approve"], gotB, gotC)
	}
	var all []int32
	for _, id := range before {
		all = append(all, id)
	}
	if gotC <= slices.Max(all) {
		t.Errorf("a new item got id %d, not above every id given before (up to %d)", gotC, slices.Max(all))
	}

	// The other methods a panel calls.
	var label dbus.Variant
	if err := r.call("GetProperty", gotA, "label").Store(&label); err != nil || label.Value() != "Approve" {
		t.Errorf("GetProperty(approve, label) = %v, %v", label, err)
	}
	if err := r.call("GetProperty", int32(999999), "label").Err; err == nil {
		t.Error("GetProperty of an unknown entry: no error")
	}
	var group []struct {
		V0 int32
		V1 map[string]dbus.Variant
	}
	if err := r.call("GetGroupProperties", []int32{gotA, 999999}, []string{"enabled"}).Store(&group); err != nil ||
		len(group) != 1 || group[0].V0 != gotA || len(group[0].V1) != 1 || group[0].V1["enabled"].Value() != true {
		t.Errorf("GetGroupProperties = %+v, %v", group, err)
	}
	var update bool
	if err := r.call("AboutToShow", int32(0)).Store(&update); err != nil || update {
		t.Errorf("AboutToShow = %v, %v", update, err)
	}
	var updates, idErrors []int32
	if err := r.call("AboutToShowGroup", []int32{0, 999999}).Store(&updates, &idErrors); err != nil || len(updates) != 0 || !slices.Equal(idErrors, []int32{999999}) {
		t.Errorf("AboutToShowGroup = %v %v, %v", updates, idErrors, err)
	}
	var version dbus.Variant
	if err := r.conn.Object(service, menuPath).Call("org.freedesktop.DBus.Properties.Get", 0, menuInterface, "Version").Store(&version); err != nil || version.Value() != menuProtocol {
		t.Errorf("Version = %v, %v", version, err)
	}
}

// A click counts as the panel's (vouched) only from the connection that
// owns org.kde.StatusNotifierWatcher now; from any other connection it is
// reported unvouched, with its sender. Clicks on entries with nothing to
// do, and events other than clicked, report nothing.
func TestDBusMenuClicks(t *testing.T) {
	addr := desktoptest.StartBus(t)
	m, service, clicks := menuOnBus(t, addr)
	a := conf("aaaa")
	m.show(menu.Render(menu.State{}.Apply(snapshot(a)), t0).Items)
	panel := newReader(t, addr, service)
	other := newReader(t, addr, service)
	m.mu.Lock()
	approve, deny, arg, none := m.ids["confirm/aaaa/approve"], m.ids["confirm/aaaa/deny"], m.ids["confirm/aaaa/arg/0"], m.ids["sessions/none"]
	m.mu.Unlock()

	next := func(what string) menu.Click {
		t.Helper()
		select {
		case c := <-clicks:
			return c
		case <-time.After(desktoptest.Timeout):
			t.Fatalf("no click reported for %s", what)
			return menu.Click{}
		}
	}
	nothing := func(what string) {
		t.Helper()
		// Event answers after it has reported: nothing queued now means
		// nothing was reported.
		select {
		case c := <-clicks:
			t.Fatalf("%s reported %+v", what, c)
		default:
		}
	}

	// Nobody owns the watcher's name yet: nobody is the panel.
	panel.click(approve)
	if c := next("a click before any panel"); c.Vouched || c.Kind != menu.ActionApprove {
		t.Fatalf("a click with no panel on the bus: %+v; want an unvouched approve", c)
	}

	if reply, err := panel.conn.RequestName(watcherName, dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("own %s: %v %v", watcherName, reply, err)
	}
	for _, tc := range []struct {
		name    string
		from    *reader
		id      int32
		kind    menu.ActionKind
		vouched bool
	}{
		{"the panel approves", panel, approve, menu.ActionApprove, true},
		{"the panel denies", panel, deny, menu.ActionDeny, true},
		{"another approves", other, approve, menu.ActionApprove, false},
		{"another denies", other, deny, menu.ActionDeny, false},
	} {
		tc.from.click(tc.id)
		c := next(tc.name)
		if c.Kind != tc.kind || c.Target != "aaaa" || c.ArgsHash != a.ArgsHash || c.Vouched != tc.vouched || c.From != desktoptest.UniqueName(tc.from.conn) {
			t.Errorf("%s: %+v; want %s of aaaa, vouched %v, from %s", tc.name, c, tc.kind, tc.vouched, desktoptest.UniqueName(tc.from.conn))
		}
	}

	// EventGroup: each event in turn, with the sender's standing; unknown
	// ids come back.
	var idErrors []int32
	events := []struct {
		V0 int32
		V1 string
		V2 dbus.Variant
		V3 uint32
	}{{approve, "clicked", dbus.MakeVariant(int32(0)), 0}, {424242, "clicked", dbus.MakeVariant(int32(0)), 0}, {approve, "opened", dbus.MakeVariant(int32(0)), 0}}
	if err := other.call("EventGroup", events).Store(&idErrors); err != nil || !slices.Equal(idErrors, []int32{424242}) {
		t.Fatalf("EventGroup = %v, %v; want the unknown id back", idErrors, err)
	}
	if c := next("EventGroup"); c.Kind != menu.ActionApprove || c.Vouched {
		t.Errorf("EventGroup from another connection: %+v; want an unvouched approve", c)
	}
	nothing("an opened event")

	for name, id := range map[string]int32{"an argument line": arg, "a disabled entry": none, "an unknown entry": 424242, "the root": 0} {
		panel.click(id)
		nothing(name)
	}
	if err := panel.call("Event", approve, "hovered", dbus.MakeVariant(int32(0)), uint32(0)).Err; err != nil {
		t.Fatal(err)
	}
	nothing("a hover")
}
