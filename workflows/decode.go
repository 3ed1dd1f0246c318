package workflows

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// The request types a client sends (workflow inputs and update arguments)
// reach the workflows as raw payloads and are decoded here, strictly: a
// request that is not a JSON object, names a field the request type does
// not have, or holds an event the event model refuses fails as a
// non-retryable InvalidArgument whose message names the request and what is
// wrong with it. Left to the SDK, such a payload failed as a retryable
// "wrapError" with the decoder's cause chain, before any workflow code ran.

// decodeRequest decodes the payload of the request named name (a workflow
// or update name) into out, a pointer to its request type. Unknown fields
// are refused.
func decodeRequest(name string, in converter.RawValue, out any) error {
	p := in.Payload()
	if p == nil {
		return invalidArgument(fmt.Sprintf("invalid %s request: the request is missing", name))
	}
	switch enc := string(p.GetMetadata()[converter.MetadataEncoding]); enc {
	case converter.MetadataEncodingJSON:
	case converter.MetadataEncodingNil:
		return invalidArgument(fmt.Sprintf("invalid %s request: the request is null; send a JSON object", name))
	default:
		return invalidArgument(fmt.Sprintf("invalid %s request: payload encoding %q is not supported; send a JSON object (encoding %q)",
			name, enc, converter.MetadataEncodingJSON))
	}
	data := p.GetData()
	if err := checkFieldNames(data, reflect.TypeOf(out).Elem()); err != nil {
		return invalidArgument(fmt.Sprintf("invalid %s request: %s", name, err))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(out)
	if err == nil {
		if _, terr := dec.Token(); terr == nil {
			err = errors.New("unexpected data after the request object")
		}
	}
	if err != nil {
		return invalidArgument(fmt.Sprintf("invalid %s request: %s", name, describeDecodeError(data, out, err)))
	}
	return nil
}

// checkFieldNames refuses an object member of data that names no field of
// t exactly: encoding/json matches names without regard to case, so
// "sessionID" would fill SessionID. It descends into the members that
// decode into structs (or slices and maps of them); values of types with
// their own decoder (events) are left to it and not parsed here.
func checkFieldNames(data []byte, t reflect.Type) error {
	return checkNames(data, t, "")
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// needsNames reports whether values of t hold object members to check.
func needsNames(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return false
	}
	switch t.Kind() {
	case reflect.Struct:
		return true
	case reflect.Slice, reflect.Array, reflect.Map:
		return needsNames(t.Elem())
	}
	return false
}

// checkNames checks raw, a JSON value of type t at path. A value that is
// not of the expected JSON kind is left to the decoder, which reports it.
func checkNames(raw json.RawMessage, t reflect.Type, path string) error {
	if !needsNames(t) {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil
		}
		for i, item := range items {
			if err := checkNames(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		var members map[string]json.RawMessage
		if json.Unmarshal(raw, &members) != nil {
			return nil
		}
		for _, key := range sortedKeys(members) {
			if err := checkNames(members[key], t.Elem(), path+"."+key); err != nil {
				return err
			}
		}
	case reflect.Struct:
		var members map[string]json.RawMessage
		if json.Unmarshal(raw, &members) != nil {
			return nil
		}
		fields := jsonFields(t)
		for _, key := range sortedKeys(members) {
			name := key
			if path != "" {
				name = path + "." + key
			}
			i := slices.IndexFunc(fields, func(f jsonField) bool { return f.name == key })
			if i < 0 {
				if j := slices.IndexFunc(fields, func(f jsonField) bool { return strings.EqualFold(f.name, key) }); j >= 0 {
					return fmt.Errorf("unknown field %q (did you mean %q? field names are case-sensitive)", name, fields[j].name)
				}
				return fmt.Errorf("unknown field %q", name)
			}
			if err := checkNames(members[key], fields[i].typ, name); err != nil {
				return err
			}
		}
	}
	return nil
}

// sortedKeys returns the keys of m in order, so that the first offender is
// reported the same way every time.
func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	// The keys are sorted before use.
	//workflowcheck:ignore
	for key := range m {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys
}

// jsonField is a JSON member of a struct type.
type jsonField struct {
	name string
	typ  reflect.Type
}

// jsonFields lists the JSON members of struct t, embedded structs inlined.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name: name, typ: f.Type})
	}
	return out
}

// eventFields are the request fields that hold events, by request type:
// an event's own decoding error is reported with its position.
var eventFields = map[reflect.Type]string{
	reflect.TypeFor[AppendRequest]():        "events",
	reflect.TypeFor[CreateSessionRequest](): "seed",
}

// describeDecodeError turns a decoding error of data into one sentence.
func describeDecodeError(data []byte, out any, err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "not valid JSON: the request ends early"
	case errors.Is(err, io.EOF):
		return "the request is empty; send a JSON object"
	case errors.As(err, &syntax):
		return fmt.Sprintf("not valid JSON at byte %d: %s", syntax.Offset, strings.TrimPrefix(syntax.Error(), "json: "))
	case errors.As(err, &typ):
		if typ.Field == "" {
			return fmt.Sprintf("the request must be a JSON object, not %s", article(typ.Value))
		}
		return fmt.Sprintf("field %q must be %s, not %s", typ.Field, jsonKind(typ.Type), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return strings.TrimPrefix(err.Error(), "json: ")
	}
	if field, ok := eventFields[reflect.TypeOf(out).Elem()]; ok {
		if where := failingEvent(data, field); where != "" {
			return where + ": " + err.Error()
		}
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// failingEvent names the first event of data's array field that does not
// decode, as `field[i]`, or returns "".
func failingEvent(data []byte, field string) string {
	var members map[string]json.RawMessage
	if json.Unmarshal(data, &members) != nil {
		return ""
	}
	var events []json.RawMessage
	if json.Unmarshal(members[field], &events) != nil {
		return ""
	}
	for i, raw := range events {
		var e session.Event
		if json.Unmarshal(raw, &e) != nil {
			return fmt.Sprintf("%s[%d]", field, i)
		}
	}
	return ""
}

// article prefixes a JSON value kind ("string", "number -1") with "a" or
// "an".
func article(kind string) string {
	if kind != "" && strings.ContainsRune("aeiou", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}

// jsonKind names the JSON value a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fmt.Sprintf("an integer that fits %d bits", t.Bits())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("a non-negative integer that fits %d bits", t.Bits())
	case reflect.Float32, reflect.Float64:
		return "a finite number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "an object"
}

// CreateSessionWorkflow is the CreateSession workflow as registered with a
// worker: it decodes the request strictly (see decodeRequest) and runs
// CreateSession. A request that does not decode fails the run with a
// non-retryable InvalidArgument, which WaitReady returns as well.
func CreateSessionWorkflow(ctx workflow.Context, in converter.RawValue) (wire.DisposeResult, error) {
	var req CreateSessionRequest
	if err := decodeRequest(wire.CreateSessionName, in, &req); err != nil {
		return refuseInput(ctx, wire.SourceStartup, err)
	}
	if req.SessionID == "" {
		return refuseInput(ctx, wire.SourceStartup, invalidArgument(emptyCreateIDText))
	}
	return CreateSession(ctx, req)
}

// ResumeSessionWorkflow is the ResumeSession workflow as registered with a
// worker, with the strict decoding of CreateSessionWorkflow.
func ResumeSessionWorkflow(ctx workflow.Context, in converter.RawValue) (wire.DisposeResult, error) {
	var req wire.ResumeSessionRequest
	if err := decodeRequest(wire.ResumeSessionName, in, &req); err != nil {
		return refuseInput(ctx, wire.SourceResume, err)
	}
	if req.ResumeSessionID == "" {
		return refuseInput(ctx, wire.SourceResume, invalidArgument(emptyResumeIDText))
	}
	return ResumeSession(ctx, req)
}

// refuseInput fails a run whose request did not decode, before any side
// effect: the handlers are registered, so a WaitReady sent with the start
// gets the failure too.
func refuseInput(ctx workflow.Context, source string, err error) (wire.DisposeResult, error) {
	set, _ := resolveOptions(nil)
	l := newLifecycle(ctx, "", source, wire.Hooks{}, nil, set)
	if rerr := l.register(); rerr != nil {
		return wire.DisposeResult{}, rerr
	}
	return wire.DisposeResult{}, l.fail(err)
}

// decodedRequests holds the requests of one update type that its
// validator decoded (and checked), by update id, until its handler takes
// them: a request is decoded once. The SDK runs an accepted update's
// handler right after its validator, in the same workflow task; a
// validator does not run on replay (nor for an update accepted in a task
// this process did not run), so the handler decodes the payload itself
// when it finds nothing kept. Either way the handler sees the same
// request: decoding is a pure function of the payload.
type decodedRequests[T any] struct {
	byID map[string]T
}

// keep keeps req, decoded and accepted by the running update's validator.
func (d *decodedRequests[T]) keep(ctx workflow.Context, req T) {
	if d.byID == nil {
		d.byID = make(map[string]T)
	}
	d.byID[workflow.GetCurrentUpdateInfo(ctx).ID] = req
}

// take returns the request of the running update: the one its validator
// kept, or in decoded as the request named name (decodeRequest).
func (d *decodedRequests[T]) take(ctx workflow.Context, name string, in converter.RawValue) (T, error) {
	req, ok := d.taken(ctx)
	if ok {
		return req, nil
	}
	err := decodeRequest(name, in, &req)
	return req, err
}

// taken returns, and forgets, the request the running update's validator
// kept, if any.
func (d *decodedRequests[T]) taken(ctx workflow.Context) (T, bool) {
	id := workflow.GetCurrentUpdateInfo(ctx).ID
	req, ok := d.byID[id]
	delete(d.byID, id)
	return req, ok
}
