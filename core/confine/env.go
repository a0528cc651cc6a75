package confine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The launcher's environment variables. Launch removes both before it
// execs the handler.
const (
	// envPolicy holds the Policy as JSON. It carries paths only: no
	// secret ever travels in it.
	envPolicy = "CARAPACE_CONFINE_POLICY"
	// envSelf marks a binary that links this package, re-executed as the
	// launcher (no bin/carapace-confine beside it): its init runs Launch.
	envSelf = "CARAPACE_CONFINE_SELF"
)

// encodePolicy is the value of envPolicy for p.
func encodePolicy(p Policy) (string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encode the policy: %w", err)
	}
	return string(b), nil
}

// decodePolicy reads envPolicy's value strictly: one JSON object, no
// unknown field, nothing after it, and a Policy that Validate accepts.
func decodePolicy(s string) (Policy, error) {
	var p Policy
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Policy{}, fmt.Errorf("%w: decode: %v", ErrPolicy, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Policy{}, fmt.Errorf("%w: decode: data after the policy", ErrPolicy)
	}
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// withoutOurs returns env without this package's variables, in order.
func withoutOurs(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if strings.HasPrefix(kv, envPolicy+"=") || strings.HasPrefix(kv, envSelf+"=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}
