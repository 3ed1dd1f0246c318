package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/httpapi"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
)

// newStore opens a store on a fresh root of encoding comp.
func newStore(t *testing.T, comp jsonl.Compression, fs jsonl.FS) *jsonl.Store {
	t.Helper()
	st, err := jsonl.NewStore(jsonl.Options{Root: t.TempDir(), Compression: comp, FS: fs})
	require.NoError(t, err)
	return st
}

// turns returns n complete turns of five events from seq 0; the texts hold
// characters JSON encoders like to escape.
func turns(t *testing.T, n int) []session.Event {
	var evs []session.Event
	for i := range n {
		evs = append(evs, sessiontest.LiveTurn(t, int64(5*i), int64(i+1), fmt.Sprintf("answer <%d> & \"more\"", i+1))...)
	}
	return evs
}

// writeSession creates id under cwd and appends evs in batches of batch
// events (each batch one zstd frame on a zstd root).
func writeSession(t *testing.T, st *jsonl.Store, id, cwd string, evs []session.Event, batch int) {
	t.Helper()
	ctx := context.Background()
	h, err := st.Create(ctx, wire.Header{ID: id, Cwd: cwd, CreatedAt: 500}, jsonl.CreateOptions{HandleID: "fixture-" + id})
	require.NoError(t, err)
	for len(evs) > 0 {
		n := min(batch, len(evs))
		require.NoError(t, h.Append(ctx, evs[:n]))
		evs = evs[n:]
	}
	require.NoError(t, h.Flush(ctx))
	require.NoError(t, h.Close(ctx))
}

// fakeControl is a Control that records its calls and answers what the
// test sets.
type fakeControl struct {
	mu      sync.Mutex
	calls   []string
	listed  []client.ListedSession
	listErr error
	phase   wire.Phase
	descErr error
	loop    wire.LoopState
	err     error // the answer of every update
	inputs  []wire.InputRequest
	decided []wire.DecideRequest
}

func (f *fakeControl) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *fakeControl) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeControl) List(context.Context) ([]client.ListedSession, error) {
	f.record("List")
	return f.listed, f.listErr
}

func (f *fakeControl) Describe(_ context.Context, id string) (wire.Description, error) {
	f.record("Describe " + id)
	return wire.Description{SessionID: id, Phase: f.phase}, f.descErr
}

func (f *fakeControl) LoopState(_ context.Context, id string) (wire.LoopState, error) {
	f.record("LoopState " + id)
	return f.loop, nil
}

func (f *fakeControl) input(name, id string, req wire.InputRequest) (wire.InputResult, error) {
	f.record(name + " " + id)
	f.mu.Lock()
	f.inputs = append(f.inputs, req)
	f.mu.Unlock()
	if f.err != nil {
		return wire.InputResult{}, f.err
	}
	return wire.InputResult{MessageID: "msg-1", Target: wire.TargetNextTurn, SplicedSeq: -1}, nil
}

func (f *fakeControl) Followup(_ context.Context, id string, req wire.InputRequest) (wire.InputResult, error) {
	return f.input("Followup", id, req)
}

func (f *fakeControl) Steer(_ context.Context, id string, req wire.InputRequest) (wire.InputResult, error) {
	return f.input("Steer", id, req)
}

func (f *fakeControl) Inject(_ context.Context, id string, req wire.InputRequest) (wire.InputResult, error) {
	return f.input("Inject", id, req)
}

func (f *fakeControl) CancelTurn(_ context.Context, id, cause string, keep bool) (wire.CancelResult, error) {
	f.record(fmt.Sprintf("CancelTurn %s %s %t", id, cause, keep))
	return wire.CancelResult{Cancelled: true, Turn: 2}, f.err
}

func (f *fakeControl) PendingApprovals(_ context.Context, id string) ([]wire.PendingApproval, error) {
	f.record("PendingApprovals " + id)
	return f.loop.Approvals, f.err
}

func (f *fakeControl) Decide(_ context.Context, id string, req wire.DecideRequest) (wire.DecideResult, error) {
	f.record("Decide " + id)
	f.mu.Lock()
	f.decided = append(f.decided, req)
	f.mu.Unlock()
	if f.err != nil {
		return wire.DecideResult{}, f.err
	}
	return wire.DecideResult{ID: req.ID, CallID: "c1", Outcome: req.Outcome}, nil
}

func (f *fakeControl) SetPermissions(_ context.Context, id string, req wire.SetPermissionsRequest) (wire.Permissions, error) {
	f.record("SetPermissions " + id)
	return wire.Permissions{SandboxMode: "workspace-write", ApprovalPolicy: req.ApprovalPolicy}, f.err
}

func (f *fakeControl) Compact(_ context.Context, id string, _ wire.CompactRequest) (wire.CompactResult, error) {
	f.record("Compact " + id)
	return wire.CompactResult{CommandID: "cmd-1", Text: "nothing to compact"}, f.err
}

func (f *fakeControl) Dispose(_ context.Context, id string) (wire.DisposeResult, error) {
	f.record("Dispose " + id)
	return wire.DisposeResult{NextSeq: 10}, f.err
}

// api is a server under test with its client side.
type api struct {
	t    *testing.T
	srv  *httpapi.Server
	http *httptest.Server
	doc  *openAPIDoc
	// token is sent as the bearer token when set.
	token string
}

func newAPI(t *testing.T, opts httpapi.Options) *api {
	t.Helper()
	s, err := httpapi.New(opts)
	require.NoError(t, err)
	hs := httptest.NewServer(s)
	t.Cleanup(func() { s.Close(); hs.Close() })
	return &api{t: t, srv: s, http: hs, doc: loadOpenAPI(t), token: opts.Token}
}

// do sends a request and returns the status and body; a JSON response is
// validated against the OpenAPI document.
func (a *api) do(method, path string, body any, header ...string) (int, []byte) {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(a.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.http.URL+path, rd)
	require.NoError(a.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(a.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	a.doc.check(a.t, method, req.URL.EscapedPath(), resp, b)
	return resp.StatusCode, b
}

// errorOf decodes an error body.
func errorOf(t *testing.T, b []byte) httpapi.ErrorInfo {
	t.Helper()
	var e httpapi.ErrorBody
	require.NoError(t, json.Unmarshal(b, &e), "%s", b)
	return e.Error
}

// openAPIDoc is the embedded document, its paths as patterns and its
// schemas compiled.
type openAPIDoc struct {
	raw      map[string]any
	paths    []docPath
	compiler *jsonschema.Compiler
	schemas  map[string]*jsonschema.Schema
}

type docPath struct {
	template string
	re       *regexp.Regexp
}

const docURL = "mem://openapi.json"

func loadOpenAPI(t *testing.T) *openAPIDoc {
	t.Helper()
	var y any
	require.NoError(t, yaml.Unmarshal(httpapi.OpenAPI, &y))
	// Through JSON: the schema compiler reads JSON values.
	b, err := json.Marshal(y)
	require.NoError(t, err)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource(docURL, doc))
	d := &openAPIDoc{raw: doc.(map[string]any), compiler: c, schemas: map[string]*jsonschema.Schema{}}
	for tmpl := range d.raw["paths"].(map[string]any) {
		re := "^" + regexp.MustCompile(`\\\{[^/]+\\\}`).ReplaceAllString(regexp.QuoteMeta(tmpl), `[^/]+`) + "$"
		d.paths = append(d.paths, docPath{template: tmpl, re: regexp.MustCompile(re)})
	}
	return d
}

// operation finds the document's operation of a request.
func (d *openAPIDoc) operation(method, path string) (string, map[string]any, bool) {
	for _, p := range d.paths {
		if p.re.MatchString(path) {
			op, ok := d.raw["paths"].(map[string]any)[p.template].(map[string]any)[strings.ToLower(method)].(map[string]any)
			return p.template, op, ok
		}
	}
	return "", nil, false
}

// check validates a JSON response against the schema the document gives
// its operation and status. A route the document lacks, or a status it
// does not list for the operation, fails the test.
func (d *openAPIDoc) check(t *testing.T, method, path string, resp *http.Response, body []byte) {
	t.Helper()
	tmpl, op, ok := d.operation(method, path)
	if !ok {
		// Answers outside the document are the server's own refusals.
		if resp.StatusCode >= 400 {
			d.validate(t, "#/components/schemas/ErrorBody", body, method, path)
			return
		}
		t.Fatalf("%s %s answered %d but the document has no such operation", method, path, resp.StatusCode)
	}
	responses := op["responses"].(map[string]any)
	r, ok := responses[strconv.Itoa(resp.StatusCode)].(map[string]any)
	if !ok && resp.StatusCode >= 400 {
		r, ok = responses["default"].(map[string]any)
	}
	if !ok {
		t.Fatalf("%s %s (%s) answered %d, a status the document does not list: %s", method, path, tmpl, resp.StatusCode, body)
	}
	if ref, ok := r["$ref"].(string); ok {
		r = d.resolve(ref)
	}
	ct := strings.Split(resp.Header.Get("Content-Type"), ";")[0]
	content, _ := r["content"].(map[string]any)
	media, ok := content[ct].(map[string]any)
	if !ok {
		t.Fatalf("%s %s answered %d as %q, which the document does not list", method, path, resp.StatusCode, ct)
	}
	if ct != "application/json" {
		return
	}
	schema := media["schema"].(map[string]any)
	ref, ok := schema["$ref"].(string)
	require.True(t, ok, "%s %s: the schema of %d is not a $ref", method, tmpl, resp.StatusCode)
	d.validate(t, ref, body, method, path)
}

func (d *openAPIDoc) resolve(ref string) map[string]any {
	var v any = d.raw
	for _, k := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		v = v.(map[string]any)[k]
	}
	return v.(map[string]any)
}

func (d *openAPIDoc) validate(t *testing.T, ref string, body []byte, method, path string) {
	t.Helper()
	sch, ok := d.schemas[ref]
	if !ok {
		var err error
		sch, err = d.compiler.Compile(docURL + ref)
		require.NoError(t, err, "compile %s", ref)
		d.schemas[ref] = sch
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	require.NoError(t, err, "%s %s: the body is not JSON: %s", method, path, body)
	if err := sch.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			t.Fatalf("%s %s: the response does not match %s: %s\nbody: %s", method, path, ref, ve, body)
		}
		t.Fatalf("%s %s: validate: %v", method, path, err)
	}
}
