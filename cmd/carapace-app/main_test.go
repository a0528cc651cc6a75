package main

import (
	"bytes"
	"strings"
	"testing"
)

// The flags that end the program before the app starts.
func TestFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		code    int
		out     string // in stdout
		errText string // in stderr
	}{
		{"version", []string{"--version"}, 0, "carapace-app dev", ""},
		{"help", []string{"-h"}, 0, "", "-home string"},
		{"unknown flag", []string{"--nope"}, 2, "", "flag provided but not defined"},
		{"bad log level", []string{"--log-level", "loud"}, 2, "", `--log-level "loud"`},
		{"an argument", []string{"serve"}, 2, "", `unexpected argument "serve"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tt.args, &out, &errb)
			if code != tt.code || !strings.Contains(out.String(), tt.out) || !strings.Contains(errb.String(), tt.errText) {
				t.Errorf("run(%q) = %d, stdout %q, stderr %q; want %d, %q, %q", tt.args, code, out.String(), errb.String(), tt.code, tt.out, tt.errText)
			}
		})
	}
}
