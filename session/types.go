package session

import (
	"fmt"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/sessionflow/sessionflow/wire"
)

var (
	// builtin is the vocabulary of this build: every type of the pinned
	// harness (harnessEventTypes, generated) and the two types of
	// sessionflow's own v3 logs that the harness does not know
	// (sessionOnlyTypes). It is never modified.
	builtin = func() map[string]bool {
		m := make(map[string]bool, len(harnessEventTypes)+len(sessionOnlyTypes))
		for _, t := range harnessEventTypes {
			m[t] = true
		}
		for _, t := range sessionOnlyTypes {
			m[t] = true
		}
		return m
	}()
	// sessionOnlyTypes are read in v3 logs only (FORMAT.md §1.2): a v0 log
	// holding one is refused, as the harness refuses it.
	sessionOnlyTypes = []string{wire.TypeSystemMessage, wire.TypeAssistantAttempt}
	vocabMu          sync.RWMutex
	// vocab holds the types added through RegisterEventType.
	vocab   = map[string]bool{}
	surface = map[string]bool{
		wire.TypeUserMessage: true, wire.TypeAssistantMessage: true, wire.TypeToolResult: true, wire.TypeSystemMessage: true,
	}
)

// builtinTypeNames maps each built-in type name to itself, so that decoded
// events share one string per built-in type.
var builtinTypeNames = func() map[string]string {
	m := make(map[string]string, len(builtin))
	for name := range builtin {
		m[name] = name
	}
	return m
}()

// RegisterEventType adds an application event type to the known vocabulary,
// so reads accept it without the ignorable flag (FORMAT.md §4.5). Register types at
// program start, before any store reads. Built-in names, empty names and
// names that are not valid UTF-8 are refused; registering the same
// application type again is a no-op.
func RegisterEventType(name string) error {
	if name == "" {
		return fmt.Errorf("session: empty event type")
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("session: event type %q is not valid UTF-8", name)
	}
	if builtin[name] {
		return fmt.Errorf("session: event type %q is built in", name)
	}
	vocabMu.Lock()
	defer vocabMu.Unlock()
	vocab[name] = true
	return nil
}

// KnownEventType reports whether name is in the vocabulary of this build.
func KnownEventType(name string) bool {
	if builtin[name] {
		return true
	}
	vocabMu.RLock()
	defer vocabMu.RUnlock()
	return vocab[name]
}

// HarnessEventTypes returns the vocabulary of the pinned DeepSeek Harness
// (HarnessVersion), sorted: the types a v0 log may hold without the
// ignorable marker.
func HarnessEventTypes() []string { return append([]string(nil), harnessEventTypes...) }

// HarnessEventType reports whether name is in the pinned harness's
// vocabulary (HarnessEventTypes).
func HarnessEventType(name string) bool { return builtin[name] && !sessionOnly(name) }

// sessionOnly reports whether name is one of sessionOnlyTypes.
func sessionOnly(name string) bool { return slices.Contains(sessionOnlyTypes, name) }

// HarnessSurfaceEligible reports whether the published harness lets events
// of this type join the surface: user/message, assistant/message and
// tool/result (system/message is sessionflow's own, in v3 logs).
func HarnessSurfaceEligible(name string) bool {
	return name == wire.TypeUserMessage || name == wire.TypeAssistantMessage || name == wire.TypeToolResult
}

// SurfaceEligible reports whether events of this type may carry surfaceOp
// and sourceEventSeqs.
func SurfaceEligible(name string) bool { return surface[name] }
