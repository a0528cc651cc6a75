package plugintest

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// fakeT is a testing.TB (and tester) that records what the code under test
// reports instead of failing the real test, so that tests can assert that
// the harness does report a broken handler. Fatal stops the goroutine with
// runtime.Goexit, as testing does; every fake test runs in its own
// goroutine for that reason.
type fakeT struct {
	testing.TB // the real test: TempDir and the like; never used to report

	name string
	rep  *report

	mu       sync.Mutex
	failed   bool
	cleanups []func()
}

// report collects the messages of a fake test and its subtests.
type report struct {
	mu      sync.Mutex
	entries []entry
}

type entry struct {
	test, kind, msg string // kind: "error", "fatal", "log", "skip"
}

// fake runs f as a fake test, then its cleanups, and returns it.
func fake(t *testing.T, f func(ft *fakeT)) *fakeT {
	t.Helper()
	ft := &fakeT{TB: t, name: "fake", rep: &report{}}
	ft.runBody(func() { f(ft) })
	return ft
}

// runBody runs body and then the cleanups, each in a goroutine of its own
// so that a Fatal (Goexit) ends only that part.
func (f *fakeT) runBody(body func()) {
	inGoroutine(body)
	f.mu.Lock()
	cs := f.cleanups
	f.cleanups = nil
	f.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		inGoroutine(cs[i])
	}
}

func inGoroutine(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

func (f *fakeT) add(kind, msg string) {
	f.rep.mu.Lock()
	f.rep.entries = append(f.rep.entries, entry{f.name, kind, msg})
	f.rep.mu.Unlock()
	if kind != "log" {
		f.Fail()
	}
}

func (f *fakeT) Helper()                           {}
func (f *fakeT) Name() string                      { return f.name }
func (f *fakeT) Context() context.Context          { return context.Background() }
func (f *fakeT) Error(args ...any)                 { f.add("error", fmt.Sprint(args...)) }
func (f *fakeT) Errorf(format string, args ...any) { f.add("error", fmt.Sprintf(format, args...)) }
func (f *fakeT) Log(args ...any)                   { f.add("log", fmt.Sprint(args...)) }
func (f *fakeT) Logf(format string, args ...any)   { f.add("log", fmt.Sprintf(format, args...)) }
func (f *fakeT) Fatal(args ...any)                 { f.add("fatal", fmt.Sprint(args...)); runtime.Goexit() }
func (f *fakeT) Fatalf(format string, args ...any) {
	f.add("fatal", fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (f *fakeT) FailNow()         { f.add("fatal", "FailNow"); runtime.Goexit() }
func (f *fakeT) Skip(args ...any) { f.add("skip", fmt.Sprint(args...)); runtime.Goexit() }
func (f *fakeT) Skipf(format string, args ...any) {
	f.add("skip", fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (f *fakeT) SkipNow() { f.add("skip", "SkipNow"); runtime.Goexit() }

func (f *fakeT) Fail() {
	f.mu.Lock()
	f.failed = true
	f.mu.Unlock()
}

func (f *fakeT) Failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

func (f *fakeT) Cleanup(fn func()) {
	f.mu.Lock()
	f.cleanups = append(f.cleanups, fn)
	f.mu.Unlock()
}

// run implements tester: a subtest, whose failure fails f too.
func (f *fakeT) run(name string, fn func(tester)) bool {
	child := &fakeT{TB: f.TB, name: f.name + "/" + name, rep: f.rep}
	child.runBody(func() { fn(child) })
	f.add("log", "ran "+child.name)
	if child.Failed() {
		f.Fail()
	}
	return !child.Failed()
}

// messages returns the messages of the given kinds ("" for failures:
// error, fatal and skip), each as "test: kind: msg".
func (f *fakeT) messages(kinds ...string) []string {
	f.rep.mu.Lock()
	defer f.rep.mu.Unlock()
	var out []string
	for _, e := range f.rep.entries {
		if kinds == nil && e.kind == "log" {
			continue
		}
		if kinds != nil && !contains(kinds, e.kind) {
			continue
		}
		out = append(out, e.test+": "+e.kind+": "+e.msg)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// failures returns the failure messages of the fake and its subtests.
func (f *fakeT) failures() []string { return f.messages() }

// mustFail checks that the fake failed with a message containing every
// one of wants (in one message each, in any order).
func mustFail(t *testing.T, ft *fakeT, wants ...string) {
	t.Helper()
	fs := ft.failures()
	if !ft.Failed() || len(fs) == 0 {
		t.Fatalf("the harness reported no failure; want one containing %q", wants)
	}
	all := strings.Join(fs, "\n")
	for _, w := range wants {
		if !strings.Contains(all, w) {
			t.Errorf("no failure contains %q; failures:\n%s", w, all)
		}
	}
}

// mustPass checks that the fake reported no failure.
func mustPass(t *testing.T, ft *fakeT) {
	t.Helper()
	if fs := ft.failures(); ft.Failed() || len(fs) > 0 {
		t.Fatalf("the harness reported failures; want none:\n%s", strings.Join(fs, "\n"))
	}
}

func TestFakeT(t *testing.T) {
	after := false
	ft := fake(t, func(ft *fakeT) {
		ft.Cleanup(func() { ft.Logf("cleanup ran") })
		ft.Fatalf("stop %d", 1)
		after = true
	})
	if after {
		t.Error("Fatalf did not stop the fake test")
	}
	mustFail(t, ft, "fake: fatal: stop 1")
	if logs := ft.messages("log"); len(logs) != 1 || !strings.Contains(logs[0], "cleanup ran") {
		t.Errorf("cleanups did not run after Fatal: %v", logs)
	}
	ok := true
	ft = fake(t, func(ft *fakeT) { ok = ft.run("sub", func(st tester) { st.Errorf("bad") }) })
	if ok || !ft.Failed() {
		t.Error("a failing subtest did not fail its parent")
	}
	mustFail(t, ft, "fake/sub: error: bad")
	mustPass(t, fake(t, func(ft *fakeT) { ft.Logf("fine") }))
}
