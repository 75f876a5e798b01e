package template_test

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/dlqquarantine/dlqq/shared/dev/template"
)

// The AWS CLI commands the docs show (the runbook's, the upgrades', the
// stream change's) cannot run here: there is no AWS account, and the
// emulators do not speak the CLI's protocols (EMULATORS.md). What can be
// checked is checked: each is an operation the service has, each flag a
// field of that operation's input (as the AWS SDK for Go models the same
// API the CLI is generated from), and every name it gives as $STACK-… is
// one the template really creates, every logical id one it declares. A
// runbook that names a queue by a name the stack no longer gives it, or a
// flag the CLI does not have, fails here instead of at 3 a.m.
func TestDocsAWSCLICommandsMatchTheAPIAndTheTemplate(t *testing.T) {
	clients := map[string]reflect.Type{
		"cloudformation": reflect.TypeOf(&cloudformation.Client{}),
		"cloudwatch":     reflect.TypeOf(&cloudwatch.Client{}),
		"logs":           reflect.TypeOf(&cloudwatchlogs.Client{}),
		"dynamodb":       reflect.TypeOf(&dynamodb.Client{}),
		"events":         reflect.TypeOf(&eventbridge.Client{}),
		"kms":            reflect.TypeOf(&kms.Client{}),
		"lambda":         reflect.TypeOf(&lambda.Client{}),
		"s3api":          reflect.TypeOf(&s3.Client{}),
		"sns":            reflect.TypeOf(&sns.Client{}),
		"sqs":            reflect.TypeOf(&sqs.Client{}),
		"sts":            reflect.TypeOf(&sts.Client{}),
	}
	// The CLI's own commands, which no API operation is, with their flags.
	customizations := map[string][]string{
		"logs tail":             {"since", "filter-pattern", "format", "follow", "log-stream-names", "log-stream-name-prefix"},
		"cloudformation deploy": {"template-file", "stack-name", "role-arn", "parameter-overrides", "capabilities", "s3-bucket", "no-execute-changeset"},
	}
	// Options every command takes.
	global := []string{"query", "output", "region", "profile", "endpoint-url", "cli-read-timeout", "cli-connect-timeout",
		"cli-binary-format", "no-cli-pager", "debug", "max-items", "starting-token", "page-size", "no-paginate"}

	tpl := open(t)
	stackNames := map[string]bool{} // what $STACK-… may name: the fixed names the template gives
	for _, f := range tpl.GetAllServerlessFunctionResources() {
		stackNames[strings.TrimPrefix(*f.FunctionName, "prod-")] = true
	}
	raw, err := os.ReadFile(template.Path())
	if err != nil {
		t.Fatal(err)
	}
	// Names the template gives with !Sub ${AWS::StackName}-<suffix>.
	for _, m := range regexp.MustCompile(`\$\{AWS::StackName\}-([a-z][a-z-]*)`).FindAllStringSubmatch(string(raw), -1) {
		stackNames[m[1]] = true
	}

	docs, _ := filepath.Glob(filepath.Join(filepath.Dir(template.Path()), "..", "docs", "*.md"))
	docs = append(docs, filepath.Join(filepath.Dir(template.Path()), "..", "README.md"))
	checked := 0
	for _, path := range docs {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(path)
		for _, cmd := range cliCommands(string(raw)) {
			if len(cmd) < 3 || cmd[2] == "…" || strings.HasPrefix(cmd[2], "...") {
				continue
			}
			service, op := cmd[1], cmd[2]
			if service == "s3" {
				continue // the high-level s3 commands (cp, ls) are not operations
			}
			checked++
			where := name + ": aws " + strings.Join(cmd[1:], " ")
			var fields func(flag string) bool
			if flags, ok := customizations[service+" "+op]; ok {
				fields = func(flag string) bool { return slices.Contains(flags, flag) }
			} else {
				client, ok := clients[service]
				if !ok {
					t.Errorf("%s: service %q is not one this test knows (add its SDK client)", where, service)
					continue
				}
				method, ok := client.MethodByName(camel(op))
				if !ok {
					t.Errorf("%s: %s has no operation %s", where, service, op)
					continue
				}
				input := method.Type.In(2).Elem()
				fields = func(flag string) bool {
					want := strings.ReplaceAll(strings.TrimPrefix(flag, "no-"), "-", "")
					for i := range input.NumField() {
						f := input.Field(i)
						if strings.EqualFold(f.Name, want) && (!strings.HasPrefix(flag, "no-") || f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Bool) {
							return true
						}
					}
					return false
				}
			}
			for _, w := range cmd[3:] {
				w = strings.TrimPrefix(w, "/aws/lambda/")
				if suffix, ok := strings.CutPrefix(w, "$STACK-"); ok && !strings.ContainsAny(suffix, "<>…*") && !stackNames[suffix] {
					t.Errorf("%s: %s: the template names nothing $STACK-%s", where, w, suffix)
				}
			}
			for i := 3; i < len(cmd); i++ {
				flag, ok := strings.CutPrefix(cmd[i], "--")
				if !ok {
					continue
				}
				if !slices.Contains(global, flag) && !fields(flag) {
					t.Errorf("%s: %s %s has no flag --%s", where, service, op, flag)
				}
				if i+1 >= len(cmd) {
					continue
				}
				value := cmd[i+1]
				switch flag {
				case "logical-resource-id":
					if _, ok := tpl.Resources[value]; !ok && value == strings.Trim(value, "$<>") && !strings.ContainsAny(value, "$<>") {
						t.Errorf("%s: --logical-resource-id %s is not a resource of the template", where, value)
					}
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("found %d AWS CLI commands in the docs: the scanner is broken", checked)
	}
}

// camel turns a CLI command name into its operation's name
// (get-queue-url → GetQueueUrl).
func camel(op string) string {
	var b strings.Builder
	for _, w := range strings.Split(op, "-") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}

// cliCommands finds every "aws <service> <command> …" in a Markdown
// document, in code spans and code blocks, commands inside $(…) included,
// split into words as a shell would (quotes kept together, $(…) one word).
func cliCommands(doc string) [][]string {
	var out [][]string
	for i := 0; i < len(doc); i++ {
		if !strings.HasPrefix(doc[i:], "aws ") || i > 0 && !strings.ContainsRune(" `(\n$", rune(doc[i-1])) {
			continue
		}
		words, _ := shellWords(doc[i:])
		if len(words) >= 3 && regexp.MustCompile(`^[a-z0-9-]+$`).MatchString(words[1]) {
			out = append(out, words)
		}
	}
	return out
}

// shellWords splits s into words up to the end of its command: an
// unquoted backtick, newline (unless continued with \), ), |, ;, or &.
func shellWords(s string) ([]string, int) {
	var words []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			words = append(words, cur.String())
			cur.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && s[i+1] == '\n':
			i++
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return append(words, cur.String()+s[i:]), len(s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '$' && i+1 < len(s) && s[i+1] == '(':
			depth, j := 0, i+1
			for ; j < len(s); j++ {
				if s[j] == '(' {
					depth++
				} else if s[j] == ')' {
					if depth--; depth == 0 {
						break
					}
				}
			}
			cur.WriteString(s[i:min(j+1, len(s))])
			i = j
		case c == ' ' || c == '\t':
			flush()
		case strings.IndexByte("`\n)|;&", c) >= 0:
			flush()
			return words, i
		default:
			cur.WriteByte(c)
		}
	}
	flush()
	return words, len(s)
}
