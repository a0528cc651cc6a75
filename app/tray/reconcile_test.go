package tray

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/app/menu"
	"github.com/carapace-dev/carapace/core/api"
)

// fakeItem is an item of fakeBackend's menu.
type fakeItem struct {
	it       menu.Item
	sep      bool
	children []*fakeItem
	parent   *fakeItem
	removed  bool
}

// fakeBackend behaves as fyne systray's menu does: append only, removable
// items, separators that stay until a reset. It counts what it was asked
// to do.
type fakeBackend struct {
	root                           fakeItem
	adds, updates, removes, resets int
}

func (f *fakeBackend) add(parent handle, it menu.Item) handle {
	p := &f.root
	if parent != nil {
		p = parent.(*fakeItem)
	}
	n := &fakeItem{it: it, parent: p}
	p.children = append(p.children, n)
	f.adds++
	return n
}

func (f *fakeBackend) addSeparator(parent handle) {
	p := &f.root
	if parent != nil {
		p = parent.(*fakeItem)
	}
	p.children = append(p.children, &fakeItem{sep: true, parent: p})
}

func (f *fakeBackend) update(h handle, it menu.Item) {
	n := h.(*fakeItem)
	if n.removed {
		panic("update of a removed item")
	}
	n.it = it
	f.updates++
}

func (f *fakeBackend) remove(h handle) {
	n := h.(*fakeItem)
	n.removed = true
	n.parent.children = slices.DeleteFunc(n.parent.children, func(c *fakeItem) bool { return c == n })
	f.removes++
}

func (f *fakeBackend) reset() {
	var mark func(*fakeItem)
	mark = func(n *fakeItem) {
		n.removed = true
		for _, c := range n.children {
			mark(c)
		}
	}
	for _, c := range f.root.children {
		mark(c)
	}
	f.root.children = nil
	f.resets++
}

// String draws the fake menu as menu.Tree.String draws a tree (without
// the icon line).
func (f *fakeBackend) String() string {
	var b strings.Builder
	var walk func(ns []*fakeItem, depth int)
	walk = func(ns []*fakeItem, depth int) {
		for _, n := range ns {
			b.WriteString(strings.Repeat("  ", depth))
			if n.sep {
				b.WriteString("---\n")
				continue
			}
			it := n.it
			switch {
			case it.Checkable && it.Checked:
				b.WriteString("[x] ")
			case it.Checkable:
				b.WriteString("[ ] ")
			}
			b.WriteString(it.Title)
			if !it.Enabled {
				b.WriteString(" (off)")
			}
			if it.Action.Kind != menu.ActionNone {
				b.WriteString(" -> " + it.Action.Kind.String())
			}
			b.WriteByte('\n')
			walk(n.children, depth+1)
		}
	}
	walk(f.root.children, 0)
	return b.String()
}

func treeText(t menu.Tree) string {
	s := t.String()
	return s[strings.IndexByte(s, '\n')+1:]
}

var t0 = time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)

func conf(id string) api.Confirmation {
	return api.Confirmation{ID: id, Tool: "echo_confirm", Group: "main", ArgsHash: strings.Repeat("ab", 32),
		Arguments: []byte(`{"message":"` + id + `"}`), ExpiresAt: t0.Add(time.Hour)}
}

func snapshot(cs ...api.Confirmation) api.WatchEvent {
	return api.WatchEvent{Type: api.WatchSnapshot, Status: &api.Status{Version: "1"}, Confirmations: cs}
}

func requested(c api.Confirmation) api.WatchEvent {
	return api.WatchEvent{Type: api.WatchConfirmationRequested, Confirmation: &c}
}

func resolved(c api.Confirmation) api.WatchEvent {
	c.Decision = "approved"
	return api.WatchEvent{Type: api.WatchConfirmationResolved, Confirmation: &c}
}

func session(id string) api.WatchEvent {
	return api.WatchEvent{Type: api.WatchSessionOpened, Session: &api.Session{ID: id, Group: "main", Runtime: "none", Started: t0}}
}

// The backend always shows the tree last applied, and common changes are
// made in place: no rebuild, only the items that changed are touched.
func TestReconcile(t *testing.T) {
	a, b, c := conf("aaaa"), conf("bbbb"), conf("cccc")
	type step struct {
		name  string
		state func(menu.State) menu.State
		now   time.Duration
		// rebuild: a full rebuild is expected; adds and removes: the items
		// added and removed in place (-1: do not check).
		rebuild       bool
		adds, removes int
	}
	apply := func(evs ...api.WatchEvent) func(menu.State) menu.State {
		return func(s menu.State) menu.State {
			for _, e := range evs {
				s = s.Apply(e)
			}
			return s
		}
	}
	steps := []step{
		{"first menu", func(s menu.State) menu.State { return s.Starting() }, 0, false, -1, 0},
		{"the core answers: new status lines, inserted", apply(snapshot()), 0, true, -1, -1},
		{"a confirmation: its submenu replaces 'nothing waits'", apply(requested(a)), 0, false, -1, 1},
		{"a second one is appended", apply(requested(b)), 0, false, -1, 0},
		{"time passes: titles change in place", nil, time.Minute, false, 0, 0},
		{"the first is decided: removed in place", apply(resolved(a)), time.Minute, false, 0, 1},
		{"a third after the second", apply(requested(c)), time.Minute, false, -1, 0},
		{"a session", apply(session("s-1")), time.Minute, false, -1, 1},
		{"paused: the item changes in place", apply(api.WatchEvent{Type: api.WatchStatus, Status: &api.Status{Version: "1", Paused: true}}), time.Minute, false, 0, 0},
		{"the core dies: rebuilt", func(s menu.State) menu.State { return s.NotRunning("killed") }, time.Minute, true, -1, -1},
		{"back", apply(snapshot(b)), time.Minute, true, -1, -1},
		{"the same again: nothing to do", nil, time.Minute, false, 0, 0},
	}
	f := &fakeBackend{}
	r := &reconciler{b: f}
	var s menu.State
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.state != nil {
				s = st.state(s)
			}
			tree := menu.Render(s, t0.Add(st.now))
			resets, adds, removes := f.resets, f.adds, f.removes
			r.apply(tree.Items)
			if got, want := f.String(), treeText(tree); got != want {
				t.Fatalf("the backend shows:\n%s\nwant:\n%s", got, want)
			}
			if rebuilt := f.resets > resets; rebuilt != st.rebuild {
				t.Errorf("rebuilt %v, want %v", rebuilt, st.rebuild)
			}
			if st.adds >= 0 && f.adds-adds != st.adds {
				t.Errorf("%d items added, want %d", f.adds-adds, st.adds)
			}
			if st.removes >= 0 && f.removes-removes != st.removes {
				t.Errorf("%d items removed, want %d", f.removes-removes, st.removes)
			}
		})
	}
}

// Edge cases of in-place changes, on hand-made trees.
func TestReconcileEdges(t *testing.T) {
	it := func(id string, children ...menu.Item) menu.Item {
		return menu.Item{ID: id, Title: id, Enabled: true, Children: children}
	}
	sep := func(id string) menu.Item { return menu.Item{ID: id, Separator: true} }
	check := func(id string, on bool) menu.Item {
		return menu.Item{ID: id, Title: id, Enabled: true, Checkable: true, Checked: on}
	}
	tests := []struct {
		name     string
		from, to []menu.Item
		rebuild  bool
	}{
		{"append", []menu.Item{it("a")}, []menu.Item{it("a"), it("b")}, false},
		{"insert before", []menu.Item{it("b")}, []menu.Item{it("a"), it("b")}, true},
		{"reorder", []menu.Item{it("a"), it("b")}, []menu.Item{it("b"), it("a")}, true},
		{"remove the middle", []menu.Item{it("a"), it("b"), it("c")}, []menu.Item{it("a"), it("c")}, false},
		{"remove a separator", []menu.Item{it("a"), sep("s"), it("b")}, []menu.Item{it("a"), it("b")}, true},
		{"add a separator at the end", []menu.Item{it("a")}, []menu.Item{it("a"), sep("s")}, false},
		{"check a box", []menu.Item{check("c", false)}, []menu.Item{check("c", true)}, false},
		{"a plain item becomes a box", []menu.Item{it("c")}, []menu.Item{check("c", true)}, true},
		{"an item gains a submenu", []menu.Item{it("a")}, []menu.Item{it("a", it("x"))}, true},
		{"a submenu loses its items", []menu.Item{it("a", it("x"))}, []menu.Item{it("a")}, true},
		{"a change deep down", []menu.Item{it("a", it("x", it("y")))}, []menu.Item{it("a", it("x", it("y"), it("z")))}, false},
		{"an insertion deep down", []menu.Item{it("a", it("x", it("z")))}, []menu.Item{it("a", it("x", it("y"), it("z")))}, true},
		{"repeated IDs", []menu.Item{it("a")}, []menu.Item{it("a"), it("a")}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeBackend{}
			r := &reconciler{b: f}
			r.apply(tt.from)
			r.apply(tt.to)
			if got, want := f.String(), treeText(menu.Tree{Items: tt.to}); got != want {
				t.Fatalf("the backend shows:\n%s\nwant:\n%s", got, want)
			}
			if rebuilt := f.resets > 0; rebuilt != tt.rebuild {
				t.Errorf("rebuilt %v, want %v", rebuilt, tt.rebuild)
			}
		})
	}
}

// A click reports the action of the item as last applied, vouched for as
// the view says; a click on an item that is gone, disabled or only
// information reports nothing.
func TestClicks(t *testing.T) {
	for _, vouched := range []bool{true, false} {
		t.Run(fmt.Sprint("vouched=", vouched), func(t *testing.T) {
			tr := New(nil)
			v := &reconcileView{t: tr, vouched: vouched}
			v.rec.b = &fakeBackend{}
			a := conf("aaaa")
			s := menu.State{}.Apply(snapshot(a))
			v.show(menu.Render(s, t0).Items)
			tests := []struct {
				name string
				id   string
				want *menu.Action
			}{
				{"approve", "confirm/aaaa/approve", &menu.Action{Kind: menu.ActionApprove, Target: "aaaa", ArgsHash: a.ArgsHash}},
				{"deny", "confirm/aaaa/deny", &menu.Action{Kind: menu.ActionDeny, Target: "aaaa", ArgsHash: a.ArgsHash}},
				{"quit", "quit", &menu.Action{Kind: menu.ActionQuit}},
				{"an argument line", "confirm/aaaa/arg/0", nil},
				{"disabled", "sessions/none", nil},
				{"unknown", "confirm/zzzz/approve", nil},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					v.clicked(tt.id)
					select {
					case got := <-tr.Clicks():
						if tt.want == nil || got.Action != *tt.want || got.Vouched != vouched {
							t.Errorf("click on %s: %+v, want %v (vouched %v)", tt.id, got, tt.want, vouched)
						}
					default:
						if tt.want != nil {
							t.Errorf("click on %s: nothing, want %+v", tt.id, *tt.want)
						}
					}
				})
			}
			// Decided: its items are gone, and a late click on them does nothing.
			v.show(menu.Render(s.Apply(resolved(a)), t0).Items)
			v.clicked("confirm/aaaa/approve")
			select {
			case got := <-tr.Clicks():
				t.Errorf("a click on a removed item: %+v", got)
			default:
			}
		})
	}
}

// Update keeps only the latest tree until it is applied.
func TestUpdateCoalesces(t *testing.T) {
	tr := New(nil)
	for i := range 3 {
		tr.Update(menu.Tree{Tooltip: fmt.Sprint(i)})
	}
	if tr.pending == nil || tr.pending.Tooltip != "2" || len(tr.kick) != 1 {
		t.Errorf("pending %+v, %d kicks", tr.pending, len(tr.kick))
	}
}
