package config

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// validateData is Validate of a file's contents. It reads the file in three
// passes so that one problem does not hide the others:
//
//  1. the syntax (toml.Decode into primitives): a syntax error ends here,
//     since nothing after it can be read;
//  2. the types: each key the core knows is decoded on its own (with
//     MetaData.PrimitiveDecode, so the types are BurntSushi/toml's rules,
//     not a copy of them), a value of the wrong type is a problem and
//     leaves that setting at its default; each key the core does not know
//     is a problem, with the key it most likely meant;
//  3. the values: problems lists every value the core refuses.
//
// The problems come in the file's order; one no single line holds (a
// group named in two places) comes last.
func validateData(data []byte) ([]Problem, error) {
	var top map[string]toml.Primitive
	md, err := toml.Decode(string(data), &top)
	if err != nil {
		const rest = " (the file cannot be read past it: fix it, then validate again for any other problem)"
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return []Problem{{Line: pe.Position.Line, Message: pe.Message + rest}}, nil
		}
		return []Problem{{Message: err.Error() + rest}}, nil
	}
	v := &validator{md: &md}
	var c Config
	v.table(top, reflect.ValueOf(&c).Elem(), nil)
	v.unknownKeys()
	v.found = append(v.found, c.problems()...)

	out := make([]Problem, len(v.found))
	for i, p := range v.found {
		out[i] = Problem{Line: lineOf(data, p.key), Key: p.key.String(), Message: p.msg}
	}
	slices.SortStableFunc(out, func(a, b Problem) int {
		if (a.Line == 0) != (b.Line == 0) {
			return cmp.Compare(b.Line, a.Line) // lineless last
		}
		return cmp.Compare(a.Line, b.Line)
	})
	return out, nil
}

// keyProblem is a problem with the key it is about, before its line is
// found.
type keyProblem struct {
	key toml.Key
	msg string
}

// validator decodes a file's primitives into a Config key by key and
// collects what is wrong.
type validator struct {
	md    *toml.MetaData
	found []keyProblem
}

func (v *validator) add(k toml.Key, format string, a ...any) {
	v.found = append(v.found, keyProblem{key: k, msg: fmt.Sprintf(format, a...)})
}

var durationType = reflect.TypeFor[Duration]()

// table decodes the members of a table (m) into the struct rv, whose key
// is key. A member rv has no field for is left to unknownKeys.
func (v *validator) table(m map[string]toml.Primitive, rv reflect.Value, key toml.Key) {
	for _, name := range slices.Sorted(maps.Keys(m)) {
		f, ok := fieldByTag(rv.Type(), name)
		if !ok {
			continue
		}
		v.value(m[name], rv.FieldByIndex(f.Index), append(slices.Clone(key), name))
	}
}

// value decodes p, the value of key k, into fv.
func (v *validator) value(p toml.Primitive, fv reflect.Value, k toml.Key) {
	t := fv.Type()
	if typ := v.md.Type(k...); (t.Kind() == reflect.Map || t.Kind() == reflect.Struct && t != durationType) && typ != "Hash" && typ != "" {
		// PrimitiveDecode puts nothing in a map from a value that is not
		// a table, without a word. ("" is a table made by a header under
		// it, [plugins.NAME] making plugins.)
		v.wrongType(k, t)
		return
	}
	switch {
	case t.Kind() == reflect.Struct && t != durationType:
		var m map[string]toml.Primitive
		if err := v.md.PrimitiveDecode(p, &m); err != nil {
			v.wrongType(k, t)
			return
		}
		v.table(m, fv, k)
	case t.Kind() == reflect.Map && t.Elem().Kind() == reflect.Struct:
		// A table of tables the user names ([groups.NAME]).
		var m map[string]toml.Primitive
		if err := v.md.PrimitiveDecode(p, &m); err != nil {
			v.wrongType(k, t)
			return
		}
		mv := reflect.MakeMapWithSize(t, len(m))
		for _, name := range slices.Sorted(maps.Keys(m)) {
			ev := reflect.New(t.Elem()).Elem()
			v.value(m[name], ev, append(slices.Clone(k), name))
			mv.SetMapIndex(reflect.ValueOf(name), ev)
		}
		fv.Set(mv)
	default:
		err := v.md.PrimitiveDecode(p, fv.Addr().Interface())
		if err == nil {
			return
		}
		fv.SetZero()
		// A ParseError here is the value's own UnmarshalText refusing it
		// (a duration); anything else is a type mismatch.
		var pe toml.ParseError
		if errors.As(err, &pe) {
			v.add(k, "%s: %s", k, pe.Message)
			return
		}
		v.wrongType(k, t)
	}
}

// wrongType reports that key k holds a value of another type than t.
func (v *validator) wrongType(k toml.Key, t reflect.Type) {
	want := typeName(t)
	got := map[string]string{
		"Integer": "an integer", "Float": "a number with a fraction", "String": "a string", "Bool": "true or false",
		"Array": "a list", "Hash": "a table", "ArrayHash": "a list of tables",
	}[v.md.Type(k...)]
	if strings.HasPrefix(v.md.Type(k...), "Date") || strings.HasPrefix(v.md.Type(k...), "Time") {
		got = "a date or time"
	}
	switch {
	case got == "" || got == "a list" && t.Kind() == reflect.Slice:
		v.add(k, "%s must be %s", k, want)
	default:
		v.add(k, "%s must be %s (it is %s)", k, want, got)
	}
}

// typeName says what a value of type t is written as in TOML.
func typeName(t reflect.Type) string {
	switch {
	case t == durationType:
		return `a duration in quotes, like "30s" or "5m"`
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		return "a list of strings"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Map, reflect.Struct:
		return "a table"
	}
	return t.String()
}

// fieldByTag returns the field of struct type t whose toml tag names key.
func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("toml"), ","); name == key && name != "-" {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// unknownKeys reports each key of the file that is neither a key nor a
// table the core knows. Only the first of an unknown table's keys is
// reported (the table's header, usually), and none under a key the core
// knows as a value: wrongType reports that one.
func (v *validator) unknownKeys() {
	var reported []toml.Key
	under := func(k toml.Key, p toml.Key) bool { return len(p) < len(k) && slices.Equal(k[:len(p)], p) }
	for _, k := range v.md.Keys() {
		if known(k) || knownTable(k) {
			continue
		}
		if slices.ContainsFunc(reported, func(r toml.Key) bool { return under(k, r) }) {
			continue
		}
		leafAbove := false
		for i := 1; i < len(k); i++ {
			leafAbove = leafAbove || known(k[:i])
		}
		if leafAbove {
			continue
		}
		reported = append(reported, k)
		msg := "unknown key " + k.String()
		if s := Suggest(k.String()); s != "" {
			msg += " (did you mean " + s + "?)"
		}
		v.add(k, "%s", msg)
	}
}
