package discovery

import (
	"fmt"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
)

// Severity says how badly a finding breaks the spec: an Error breaks a
// rule, a Warning is a risk or a departure the agent works around. Whether
// the Company can be used is BlocksUse's to say, not the severity's.
type Severity string

const (
	// Error findings break a rule of the spec: the Company's to fix.
	Error Severity = "error"
	// Warning findings are reported; the agent carries on.
	Warning Severity = "warning"
)

// Finding is one rule a Company's documents break, with the spec section the
// rule comes from (a section of Poppy 0.1, or an RFC such as "RFC 8414 §3").
type Finding struct {
	Severity Severity `json:"severity"`
	Section  string   `json:"section"`
	Message  string   `json:"message"`
	// BlocksUse reports that the Company cannot be used because of this
	// finding: an error in something the agent would use. An error in what
	// the agent skips (an extension it does not support, one MCP API whose
	// metadata is broken) is still reported, but blocks nothing else.
	// Poppy 0.1 §3.3: "Personal Agents and Companies MUST ignore extensions
	// they don't support and fields they don't recognize".
	BlocksUse bool `json:"blocks_use"`
}

func (f Finding) String() string {
	if f.Severity == Error && !f.BlocksUse {
		return fmt.Sprintf("%s §%s (skipped, does not block use): %s", f.Severity, f.Section, f.Message)
	}
	return fmt.Sprintf("%s §%s: %s", f.Severity, f.Section, f.Message)
}

// findings collects findings as the rules run.
type findings []Finding

// errorf adds an error in something the agent uses: it blocks use.
func (fs *findings) errorf(section, format string, args ...any) {
	*fs = append(*fs, Finding{Error, section, fmt.Sprintf(format, args...), true})
}

// skippedf adds an error in something the agent skips: it blocks nothing.
func (fs *findings) skippedf(section, format string, args ...any) {
	*fs = append(*fs, Finding{Error, section, fmt.Sprintf(format, args...), false})
}

func (fs *findings) warnf(section, format string, args ...any) {
	*fs = append(*fs, Finding{Warning, section, fmt.Sprintf(format, args...), false})
}

// skipped returns fs as findings about something the agent skips: none
// blocks use, and each says what is skipped.
func skipped(fs []Finding, what string) []Finding {
	out := make([]Finding, len(fs))
	for i, f := range fs {
		f.BlocksUse = false
		f.Message += ": " + what
		out[i] = f
	}
	return out
}

// blocking reports whether any finding blocks use.
func blocking(fs []Finding) bool {
	for _, f := range fs {
		if f.BlocksUse {
			return true
		}
	}
	return false
}

// RefusedError is returned for a Company whose documents have findings that
// block use. Its message lists them so a caller can show why.
type RefusedError struct {
	Domain   string
	Findings []Finding // the findings that block use only
}

func (e *RefusedError) Error() string {
	msgs := make([]string, len(e.Findings))
	for i, f := range e.Findings {
		msgs[i] = fmt.Sprintf("§%s %s", f.Section, f.Message)
	}
	return fmt.Sprintf("discovery: %s is not usable: %s", e.Domain, strings.Join(msgs, "; "))
}

// quote is a value the Company wrote, as a finding's words name it:
// cleaned, on one line and marked as the Company's (Company text "…"),
// since findings reach the model inside poppy-mcp's own sentences.
func quote(s string) string { return untrusted.Quote(s, 300) }

// quoteAll is each of a list of the Company's values quoted, in brackets.
func quoteAll(list []string) string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = quote(s)
	}
	return "[" + strings.Join(out, ", ") + "]"
}
