package discovery

import (
	"fmt"
	"strings"
)

// Severity says whether a finding makes the Company unusable.
type Severity string

const (
	// Error findings make the Company unusable: the agent refuses it.
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
}

func (f Finding) String() string {
	return fmt.Sprintf("%s §%s: %s", f.Severity, f.Section, f.Message)
}

// findings collects findings as the rules run.
type findings []Finding

func (fs *findings) errorf(section, format string, args ...any) {
	*fs = append(*fs, Finding{Error, section, fmt.Sprintf(format, args...)})
}

func (fs *findings) warnf(section, format string, args ...any) {
	*fs = append(*fs, Finding{Warning, section, fmt.Sprintf(format, args...)})
}

// hasErrors reports whether any finding is an error.
func hasErrors(fs []Finding) bool {
	for _, f := range fs {
		if f.Severity == Error {
			return true
		}
	}
	return false
}

// RefusedError is returned for a Company whose documents have error findings.
// Its message lists them so a caller can show why.
type RefusedError struct {
	Domain   string
	Findings []Finding // the error findings only
}

func (e *RefusedError) Error() string {
	msgs := make([]string, len(e.Findings))
	for i, f := range e.Findings {
		msgs[i] = fmt.Sprintf("§%s %s", f.Section, f.Message)
	}
	return fmt.Sprintf("discovery: %s is not usable: %s", e.Domain, strings.Join(msgs, "; "))
}
