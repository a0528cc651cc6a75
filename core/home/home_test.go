package home

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckGroup(t *testing.T) {
	for g, ok := range map[string]bool{
		"main": true, "family-chat": true, "a_b-9": true,
		"": false, "../etc": false, "a/b": false, "a b": false, ".": false, "é": false,
		strings.Repeat("a", 64): true, strings.Repeat("a", 65): false,
	} {
		if err := CheckGroup(g); (err == nil) != ok {
			t.Errorf("CheckGroup(%q) = %v, want ok=%v", g, err, ok)
		}
	}
}

func TestResolveAndEnsure(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(Env, filepath.Join(dir, "env"))
	if d, _ := Resolve(""); string(d) != filepath.Join(dir, "env") {
		t.Fatalf("from env: %s", d)
	}
	if d, _ := Resolve(filepath.Join(dir, "flag")); string(d) != filepath.Join(dir, "flag") {
		t.Fatalf("flag wins: %s", d)
	}
	d := Dir(filepath.Join(dir, "h"))
	if err := os.MkdirAll(d.RunDir(), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := d.Ensure(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{string(d), d.RunDir(), d.SessionsDir(), d.LogsDir(), d.ConversationsDir()} {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v, want 0700", p, st.Mode().Perm(), err)
		}
	}
}
