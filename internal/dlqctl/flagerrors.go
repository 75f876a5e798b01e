package dlqctl

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// Errors name the flag the user typed, not the request field or the
// policy setting it became: each problem the redrive request's validation
// (here and in the function) or a policy's validation reports is
// rewritten through a table of its fields and their flags.

// requestPrefix starts the text of a *redrive.RequestError.
const requestPrefix = "invalid redrive request: "

// fieldFlags are the redrive request's fields that dlqctl redrive sets,
// and the flags that set them.
var fieldFlags = []struct {
	re   *regexp.Regexp
	flag string
}{
	{regexp.MustCompile(`\bbatch_size\b`), "--batch-size"},
	{regexp.MustCompile(`\bmax_messages\b`), "--max"},
	{regexp.MustCompile(`\brate_per_second\b`), "--rate"},
	{regexp.MustCompile(`\brequested_by\b`), "--actor"},
	{regexp.MustCompile(`\bfirst_seen_from\b`), "--since"},
	{regexp.MustCompile(`\bfirst_seen_to\b`), "--until"},
	{regexp.MustCompile(`\bcleared_reasons\b`), "--cleared"},
	{regexp.MustCompile(`\binclude_parked\b`), "--include-parked"},
	{regexp.MustCompile(`^class\b`), "--class"},
	{regexp.MustCompile(`^source\b`), "--source"},
	{regexp.MustCompile(`^target\b`), "--target"},
}

var idIndex = regexp.MustCompile(`\bids\[(\d+)\]`)

// flagMapper rewrites one problem of a request built from flags.
type flagMapper func(problem string) string

// redriveFlags is the mapper of dlqctl redrive: ids[i] becomes the i-th
// --id value.
func redriveFlags(ids []string) flagMapper {
	return func(p string) string {
		return mapFields(p, func(i int) string {
			if i < len(ids) {
				return fmt.Sprintf("--id %q", ids[i])
			}
			return fmt.Sprintf("--id value %d", i+1)
		})
	}
}

// fixFlags is the mapper of dlqctl fix: its one id is the ID argument,
// its payload and reason come from --payload-file and --reason.
func fixFlags(id string) flagMapper {
	return func(p string) string {
		switch {
		case strings.HasPrefix(p, "correct needs the corrected payload"):
			return "--payload-file is empty: " + p
		case strings.HasPrefix(p, "correct needs a reason"):
			return "--reason is required: it is recorded in the sealed history"
		}
		return mapFields(p, func(int) string { return fmt.Sprintf("ID %q", id) })
	}
}

// recordFlags is the mapper of the commands that act on the record given
// as their ID argument (park, unpark, show --payload).
func recordFlags(id string) flagMapper {
	return func(p string) string {
		switch {
		case p == "ids[0] names no record":
			return fmt.Sprintf("no record %q", id)
		case strings.HasSuffix(p, " needs a reason: it is recorded in the sealed history"):
			return "--reason is required: it is recorded in the sealed history"
		}
		return mapFields(p, func(int) string { return "record " + id })
	}
}

func mapFields(p string, id func(i int) string) string {
	p = idIndex.ReplaceAllStringFunc(p, func(m string) string {
		i, _ := strconv.Atoi(idIndex.FindStringSubmatch(m)[1])
		return id(i)
	})
	for _, f := range fieldFlags {
		p = f.re.ReplaceAllString(p, f.flag)
	}
	return p
}

// mapRequestError rewrites a *redrive.RequestError's problems (a request
// refused before it was sent) through m, as a usage error.
func mapRequestError(err error, m flagMapper) error {
	var re *redrive.RequestError
	if !errors.As(err, &re) {
		return err
	}
	out := make([]string, len(re.Problems))
	for i, p := range re.Problems {
		out[i] = m(p)
	}
	return &UsageError{errors.New(strings.Join(out, "; "))}
}

// mapFunctionError rewrites the text of a function error: a request error
// (which the function returns whole) has its problems rewritten through m,
// any other text (a held record, one that changed meanwhile, a payload too
// large) as one problem.
func mapFunctionError(msg string, m flagMapper) string {
	if m == nil {
		return msg
	}
	rest, ok := strings.CutPrefix(msg, requestPrefix)
	if !ok {
		return m(msg)
	}
	probs := strings.Split(rest, "; ")
	for i, p := range probs {
		probs[i] = m(p)
	}
	return strings.Join(probs, "; ")
}

// policyFlags are the starts of the policy validation's problems, and how
// each reads with the flags of dlqctl policy add.
var policyFlags = []struct{ from, to string }{
	{"source is required", "--source is required"},
	{"class ", "--class "},
	{"a policy must be narrow: give signatures, a first-seen window or a minimum age", "a policy must be narrow: give --signature, --since or --min-age"},
	{"the first-seen window ends before it starts", "--since is after --until: the first-seen window ends before it starts"},
	{"max per run ", "--max-per-run "},
	{"rate must not be negative", "--rate must not be negative"},
	{"the expiry must be in the future", "--expires must be in the future"},
	{"a policy expires within 90 days", "--expires is too far: a policy expires within 90 days"},
	{"the breaker threshold must be between 0 and 1", "--threshold must be between 0 and 1"},
	{"the breaker's minimum sample must be at least 1", "--min-sample must be at least 1"},
	{"who creates it is required", "--actor is required"},
}

// mapPolicyError rewrites a *policy.Error of policy add as a usage error
// naming flags.
func mapPolicyError(err error) error {
	var pe *policy.Error
	if !errors.As(err, &pe) {
		return err
	}
	out := make([]string, len(pe.Problems))
	for i, p := range pe.Problems {
		out[i] = p
		for _, f := range policyFlags {
			if rest, ok := strings.CutPrefix(p, f.from); ok {
				out[i] = f.to + rest
				break
			}
		}
	}
	return &UsageError{errors.New("policy refused: " + strings.Join(out, "; "))}
}
