package wire

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// What a session workflow shows in the Temporal UI and `temporal workflow
// describe` (docs/API.md, Temporal UI): the static summary and details it
// is started with (StartWorkflowOptions.StaticSummary / StaticDetails, the
// same on a SessionLoop's child), its current details (set by the workflow
// as it runs), and each activity's summary. They are user metadata: a
// replay does not compare them, and no payload or event carries them.

// MaxSummaryName bounds a name (an id, a model, a cwd) in a summary: a
// longer one is cut and ends with "…".
const MaxSummaryName = 120

// SummaryName returns s for a one-line summary: as is when it is at most
// MaxSummaryName bytes of printable characters, else cut there and quoted
// with Go escapes when it holds anything else (a control or
// bidirectional-formatting character: not printable; a backquote, which
// would open Temporal markdown code; invalid UTF-8) — so a caller's text
// can neither break the line nor reorder it.
func SummaryName(s string) string {
	if len(s) > MaxSummaryName {
		cut := MaxSummaryName
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) || r == '`' {
			return strconv.Quote(s)
		}
	}
	return s
}

// CreateSummary returns the static summary and details of a CreateSession
// workflow started with req.
func CreateSummary[E any](req CreateSessionRequestOf[E]) (summary, details string) {
	var cwd, parent string
	if req.Meta != nil {
		cwd, parent = req.Meta.Cwd, req.Meta.ParentSession
	}
	if req.Fork != nil && parent == "" {
		parent = req.Fork.ParentSessionID
	}
	summary = "session " + SummaryName(req.SessionID) + " · create"
	if r := routeOf(req.AgentOptions); r != "" {
		summary += " · " + r
	}
	var b strings.Builder
	detailsHead(&b, req.SessionID, "CreateSession: a new session")
	if cwd != "" {
		fmt.Fprintf(&b, "**cwd** %s\n", SummaryName(cwd))
	}
	detailsAgent(&b, req.AgentOptions)
	switch {
	case req.Fork != nil:
		fmt.Fprintf(&b, "**fork of** %s (first %d events)\n", SummaryName(req.Fork.ParentSessionID), req.Fork.Count)
	case parent != "":
		fmt.Fprintf(&b, "**parent** %s\n", SummaryName(parent))
	}
	if req.Seed != nil {
		fmt.Fprintf(&b, "**seed** %d events\n", len(req.Seed))
	}
	return summary, strings.TrimSuffix(b.String(), "\n")
}

// ResumeSummary returns the static summary and details of a ResumeSession
// workflow started with req. The cwd and the route a resume takes from
// the log are not known before it runs: its current details show them.
func ResumeSummary(req ResumeSessionRequest) (summary, details string) {
	summary = "session " + SummaryName(req.ResumeSessionID) + " · resume"
	if r := routeOf(req.AgentOptions); r != "" {
		summary += " · " + r
	}
	var b strings.Builder
	detailsHead(&b, req.ResumeSessionID, "ResumeSession: a stored session, crash-repaired, live again")
	detailsAgent(&b, req.AgentOptions)
	if routeOf(req.AgentOptions) == "" {
		b.WriteString("**model** the route the log records\n")
	}
	return summary, strings.TrimSuffix(b.String(), "\n")
}

// LoopSummary returns the static summary and details of a SessionLoop
// workflow.
func LoopSummary(loopID string, in SessionLoopInput) (summary, details string) {
	summary = "session loop " + SummaryName(loopID)
	queue := "the loop's own task queue"
	if in.SessionTaskQueue != "" {
		queue = "task queue " + SummaryName(in.SessionTaskQueue)
	}
	return summary, fmt.Sprintf("**loop** %s\n**sessions start on** %s", SummaryName(loopID), queue)
}

func detailsHead(b *strings.Builder, id, what string) {
	fmt.Fprintf(b, "**session** %s\n**workflow** %s\n", SummaryName(id), what)
}

func detailsAgent(b *strings.Builder, o *AgentOptions) {
	if o == nil {
		return
	}
	if r := routeOf(o); r != "" {
		fmt.Fprintf(b, "**model** %s\n", r)
	}
	var perm []string
	if o.Preset != "" {
		perm = append(perm, "preset "+SummaryName(o.Preset))
	}
	if o.SandboxMode != "" {
		perm = append(perm, "sandbox "+SummaryName(o.SandboxMode))
	}
	if o.ApprovalPolicy != "" {
		perm = append(perm, "approvals "+SummaryName(o.ApprovalPolicy))
	}
	if len(perm) > 0 {
		fmt.Fprintf(b, "**permissions** %s\n", strings.Join(perm, " · "))
	}
}

// routeOf is "provider/model", the one given, or "".
func routeOf(o *AgentOptions) string {
	if o == nil {
		return ""
	}
	switch {
	case o.Provider != "" && o.Model != "":
		return SummaryName(o.Provider) + "/" + SummaryName(o.Model)
	case o.Model != "":
		return SummaryName(o.Model)
	}
	return SummaryName(o.Provider)
}
