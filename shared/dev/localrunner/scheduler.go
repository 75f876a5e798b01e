package localrunner

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/awslabs/goformation/v7/cloudformation"
)

// Schedule is one EventBridge schedule rule of the template.
type Schedule struct {
	Rule  string
	Every time.Duration
	// Function is the target's function name; Input its constant input,
	// nil when the target has none (EventBridge then sends the scheduled
	// event, see Payload).
	Function string
	Input    json.RawMessage
	// RuleARN, Region and Account go into the scheduled event; the caller
	// sets RuleARN (SchedulesFromTemplate takes region and account from
	// the target's ARN).
	RuleARN string
	Region  string
	Account string
}

// Name is what the schedule does: its Input's action ("settle",
// "policies") when it has one, else the rule's logical id.
func (s Schedule) Name() string {
	var in struct{ Action string }
	if json.Unmarshal(s.Input, &in) == nil && in.Action != "" {
		return in.Action
	}
	return s.Rule
}

// Payload is what EventBridge sends the target at now: the rule's constant
// Input, or the scheduled event when the target has none.
func (s Schedule) Payload(now time.Time) json.RawMessage {
	if s.Input != nil {
		return s.Input
	}
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	ev := map[string]any{
		"version": "0", "id": fmt.Sprintf("%x-%x-%x-%x-%x", id[0:4], id[4:6], id[6:8], id[8:10], id[10:]),
		"detail-type": "Scheduled Event", "source": "aws.events",
		"account": s.Account, "time": now.UTC().Format(time.RFC3339), "region": s.Region,
		"resources": []string{s.RuleARN}, "detail": map[string]any{},
	}
	raw, _ := json.Marshal(ev)
	return raw
}

var rateExpr = regexp.MustCompile(`^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$`)

// ParseRate reads an EventBridge rate expression. Cron expressions are
// refused with a clear error: the local runner only runs rates.
func ParseRate(expr string) (time.Duration, error) {
	m := rateExpr.FindStringSubmatch(strings.TrimSpace(expr))
	if m == nil {
		return 0, fmt.Errorf("schedule %q: the local runner understands rate(N minutes|hours|days) only", expr)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("schedule %q: not a positive rate", expr)
	}
	unit := map[string]time.Duration{"minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}[strings.TrimSuffix(m[2], "s")]
	return time.Duration(n) * unit, nil
}

// SchedulesFromTemplate reads every schedule rule and its Lambda target, so
// the local runner runs what the template deploys.
func SchedulesFromTemplate(t *cloudformation.Template) ([]Schedule, error) {
	var out []Schedule
	for id, rule := range t.GetAllEventsRuleResources() {
		if rule.ScheduleExpression == nil {
			continue
		}
		every, err := ParseRate(aws.ToString(rule.ScheduleExpression))
		if err != nil {
			return nil, fmt.Errorf("rule %s: %w", id, err)
		}
		for _, target := range rule.Targets {
			_, name, ok := strings.Cut(target.Arn, ":function:")
			if !ok {
				return nil, fmt.Errorf("rule %s targets %s, not a function", id, target.Arn)
			}
			s := Schedule{Rule: id, Every: every, Function: name}
			if p := strings.Split(target.Arn, ":"); len(p) >= 5 {
				s.Region, s.Account = p[3], p[4]
			}
			if target.Input != nil {
				s.Input = json.RawMessage(*target.Input)
			}
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Function != out[j].Function {
			return out[i].Function < out[j].Function
		}
		return out[i].Rule < out[j].Rule
	})
	return out, nil
}

// RunSchedules invokes each schedule's handler at its rate until ctx is
// done, with the schedule's Payload. handlers maps function names to what
// runs them.
func RunSchedules(ctx context.Context, schedules []Schedule, handlers map[string]func(context.Context, json.RawMessage) error, log *slog.Logger) error {
	for _, s := range schedules {
		if handlers[s.Function] == nil {
			return fmt.Errorf("rule %s targets %s, which the local runner does not run", s.Rule, s.Function)
		}
	}
	done := make(chan struct{})
	for _, s := range schedules {
		go func() {
			t := time.NewTicker(s.Every)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					done <- struct{}{}
					return
				case <-t.C:
					if err := handlers[s.Function](ctx, s.Payload(time.Now())); err != nil && ctx.Err() == nil {
						log.Warn("scheduled invocation failed", "rule", s.Rule, "function", s.Function, "error", err.Error())
					}
				}
			}
		}()
	}
	for range schedules {
		<-done
	}
	return nil
}
