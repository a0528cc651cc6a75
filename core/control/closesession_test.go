package control_test

import (
	"errors"
	"testing"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/control/controltest"
)

// Client.CloseSession closes a session another client opened (the
// menu-bar app's Stop): the core closes it, the opener's stream ends, and
// a second close says the session is gone.
func TestClientCloseSession(t *testing.T) {
	h := controltest.TempHome(t)
	b := controltest.NewBackend(h)
	controltest.Start(t, b, h.ControlSocket())
	opener := control.NewClient(h.ControlSocket())
	sh, err := opener.OpenSession(t.Context(), "main")
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	id := sh.Info().ID

	other := control.NewClient(h.ControlSocket())
	tests := []struct {
		name    string
		id      string
		wantErr error
	}{
		{"a live session", id, nil},
		{"the same again", id, api.ErrNotFound},
		{"no such session", "s-nothere", api.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := other.CloseSession(t.Context(), tt.id)
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("CloseSession(%s) = %v, want %v", tt.id, err, tt.wantErr)
			}
		})
	}
	if got := b.Closed(); len(got) != 1 || got[0] != id {
		t.Errorf("the core closed %v, want [%s]", got, id)
	}
	<-sh.Done() // the opener's stream ends with the session
}
