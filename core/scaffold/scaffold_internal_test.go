package scaffold

import "testing"

func TestGoName(t *testing.T) {
	for tool, want := range map[string]string{
		"echo": "echo", "weather_now": "weatherNow", "send_email_now": "sendEmailNow", "a__b": "aB", "x_1": "x1",
	} {
		if got := goName(tool); got != want {
			t.Errorf("goName(%q) = %q, want %q", tool, got, want)
		}
	}
}

func TestModQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/home/u/src/carapace":  "/home/u/src/carapace",
		"/Users/A B/carapace":   `"/Users/A B/carapace"`,
		`/tmp/quo"te`:           `"/tmp/quo\"te"`,
		"/tmp/semi;colon//x":    `"/tmp/semi;colon//x"`,
		"/tmp/v1.2.3-rc+meta~x": "/tmp/v1.2.3-rc+meta~x",
	} {
		if got := modQuote(in); got != want {
			t.Errorf("modQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestModulePath(t *testing.T) {
	for in, want := range map[string]string{
		"module github.com/carapace-dev/carapace\n\ngo 1.26\n": "github.com/carapace-dev/carapace",
		"// c\nmodule \"example.com/x\"\n":                     "example.com/x",
		"go 1.26\n":                                            "",
	} {
		if got := modulePath([]byte(in)); got != want {
			t.Errorf("modulePath(%q) = %q, want %q", in, got, want)
		}
	}
}
