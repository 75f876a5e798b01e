package template_test

import (
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/dlqquarantine/dlqq/shared/dev/template"
)

// An alarm without AlarmName gets a generated name, as a table or bucket
// does; Ref on an alarm is its name and Fn::GetAtt Arn its ARN, so a
// composite alarm's rule names the alarms the embedded stack creates.
func TestAlarmNamesResolve(t *testing.T) {
	tpl, err := template.Open(filepath.Join("..", "embedded", "testdata", "alarms.yaml"), env)
	if err != nil {
		t.Fatal(err)
	}
	unnamed, err := tpl.GetCloudWatchAlarmWithName("UnnamedAlarm")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := aws.ToString(unnamed.AlarmName), template.GeneratedName("prod", "UnnamedAlarm", 255); got != want {
		t.Fatalf("UnnamedAlarm named %q, want %q", got, want)
	}
	both, err := tpl.GetCloudWatchCompositeAlarmWithName("BothAlarm")
	if err != nil {
		t.Fatal(err)
	}
	want := `ALARM("arn:aws:cloudwatch:eu-west-1:111122223333:alarm:` + template.GeneratedName("prod", "UnnamedAlarm", 255) + `") AND ALARM(prod.math)`
	if both.AlarmRule != want || aws.ToString(both.AlarmName) != "prod.both" {
		t.Fatalf("BothAlarm %q rule %q, want %q", aws.ToString(both.AlarmName), both.AlarmRule, want)
	}
	if tpl.Conditions["IsProd"] != false {
		t.Fatalf("condition IsProd = %v", tpl.Conditions["IsProd"])
	}
}

// Every alarm of infra/template.yaml is named "<stack>.…", the prefix
// dlqctl health lists.
func TestTemplateAlarmsAreNamedByTheStack(t *testing.T) {
	tpl := open(t)
	for id, a := range tpl.GetAllCloudWatchAlarmResources() {
		if name := aws.ToString(a.AlarmName); len(name) <= len("prod.") || name[:len("prod.")] != "prod." {
			t.Errorf("%s is named %q", id, name)
		}
	}
	if n := len(tpl.GetAllCloudWatchAlarmResources()); n == 0 {
		t.Fatal("no alarms")
	}
}
