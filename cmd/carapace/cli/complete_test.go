package cli_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/control"
)

// Every flag and argument that names something of this Carapace completes
// it, from the running core or the home.
func TestCompletions(t *testing.T) {
	fc := newFakeCore(t)
	h := fc.home
	if err := os.WriteFile(h.Config(), []byte("[groups.main]\n[groups.family]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(h.Path("groups", "dev", "workspace"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(h.Path("groups", "bad name"), 0o700); err != nil {
		t.Fatal(err)
	}
	fc.b.AddConfirmation(api.Confirmation{ID: "c-0123456789abcdef", Tool: "send_mail", Group: "main"})
	fc.b.AddTaskView(api.Task{ID: "t-ab12cd34", Group: "main", Schedule: "every 1h"})
	sess, err := control.NewClient(h.ControlSocket()).Open(context.Background(), api.SessionRequest{Group: "main", Runtime: "none"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	id := sess.Info().ID

	groups := []string{"dev\n", "family\n", "main\n"}
	for _, tc := range []struct {
		args []string
		want []string
		not  []string
	}{
		{[]string{"run", "--group", ""}, groups, []string{"bad name"}},
		{[]string{"audit", "--group", ""}, groups, nil},
		{[]string{"tasks", "add", "--group", ""}, groups, nil},
		{[]string{"audit", "--session", ""}, []string{id + "\tmain, none"}, nil},
		{[]string{"run", "--runtime", ""}, []string{"container\n", "docker\n", "none\n"}, nil},
		{[]string{"serve", "--log-level", ""}, []string{"debug\n", "error\n"}, nil},
		{[]string{"setup", "--engine", ""}, []string{"auto\n", "apple\n"}, nil},
		{[]string{"confirm", "approve", ""}, []string{"c-0123456789abcdef"}, nil},
		{[]string{"tasks", "rm", ""}, []string{"t-ab12cd34\tevery 1h"}, nil},
		{[]string{"config", "get", ""}, []string{"runtime.engine\n"}, nil},
	} {
		r := carapace(t, h, append([]string{"__complete"}, tc.args...)...)
		for _, w := range tc.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("%q completes without %q:\n%s", tc.args, w, r.stdout)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(r.stdout, w) {
				t.Errorf("%q completes %q:\n%s", tc.args, w, r.stdout)
			}
		}
		if !strings.Contains(r.stdout, ":4\n") { // ShellCompDirectiveNoFileComp
			t.Errorf("%q completes file names too:\n%s", tc.args, r.stdout)
		}
	}
}
