package applecontainer

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// container is what List needs of one entry of `container list --format
// json`.
type container struct {
	Name   string            // the id, which --name sets
	Labels map[string]string // configuration.labels
	State  string            // running, stopped, stopping, unknown
}

// listEntry decodes both shapes of an entry of `container list --format
// json`:
//
//   - before 1.0.0, PrintableContainer:
//     {"status":"running","configuration":{"id":…,"labels":{…},…},"networks":[…],"startedDate":…}
//   - from 1.0.0 (PR #1656), ManagedContainer:
//     {"id":…,"configuration":{"id":…,"labels":{…},…},"status":{"state":"running","networks":[…],"startedDate":…}}
//
// Both carry the id and the labels in configuration; only status moved.
type listEntry struct {
	ID            string `json:"id"` // 1.0.0 and later only
	Configuration struct {
		ID     string            `json:"id"`
		Labels map[string]string `json:"labels"`
	} `json:"configuration"`
	Status json.RawMessage `json:"status"` // a string before 1.0.0, an object from 1.0.0
}

// parseList parses the output of `container list --all --format json`.
func parseList(out []byte) ([]container, error) {
	out = bytes.TrimSpace(out)
	if len(out) == 0 { // nothing printed: no containers
		return nil, nil
	}
	var entries []listEntry
	if err := json.Unmarshal(out, &entries); err != nil {
		return nil, fmt.Errorf("parse container list: %w", err)
	}
	cs := make([]container, 0, len(entries))
	for i, e := range entries {
		c := container{Name: e.Configuration.ID, Labels: e.Configuration.Labels}
		if c.Name == "" {
			c.Name = e.ID
		}
		if c.Name == "" {
			return nil, fmt.Errorf("parse container list: entry %d has no id", i)
		}
		state, err := parseState(e.Status)
		if err != nil {
			return nil, fmt.Errorf("parse container list: entry %d (%s): %w", i, c.Name, err)
		}
		c.State = state
		cs = append(cs, c)
	}
	return cs, nil
}

// parseState reads the state from either shape of "status".
func parseState(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' { // before 1.0.0: "running"
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var st struct { // 1.0.0 and later: {"state":"running",…}
		State string `json:"state"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return "", fmt.Errorf("status: %w", err)
	}
	return st.State, nil
}
