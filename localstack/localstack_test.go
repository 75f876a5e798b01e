// Package localstack holds no code: its test keeps the LocalStack compose
// file and init hook in step with the template, since the machines this
// project is built on cannot run Docker.
package localstack

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/dlqquarantine/dlqq/shared/dev/template"
)

func TestComposeAndHookMatchTheTemplate(t *testing.T) {
	var compose struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
		} `yaml:"services"`
	}
	raw, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatal(err)
	}
	ls, ok := compose.Services["localstack"]
	if !ok || !strings.HasPrefix(ls.Image, "localstack/localstack:") {
		t.Fatalf("no pinned localstack service: %+v", compose.Services)
	}
	for _, mount := range []string{"./init/ready.d:/etc/localstack/init/ready.d", "../infra:/opt/dlqq/infra", "../build:/opt/dlqq/build"} {
		if !slices.ContainsFunc(ls.Volumes, func(v string) bool { return strings.HasPrefix(v, mount) }) {
			t.Errorf("compose does not mount %s", mount)
		}
	}
	services := strings.Split(ls.Environment["SERVICES"], ",")
	tpl, err := template.Open(template.Path(), template.Env{StackName: "dlqq", Region: "us-east-1", Account: "000000000000"})
	if err != nil {
		t.Fatal(err)
	}
	need := map[string]string{
		"AWS::SQS::Queue": "sqs", "AWS::DynamoDB::Table": "dynamodb", "AWS::S3::Bucket": "s3", "AWS::KMS::Key": "kms",
		"AWS::Serverless::Function": "lambda", "AWS::IAM::Role": "iam", "AWS::Logs::LogGroup": "logs", "AWS::Events::Rule": "events",
		"AWS::SNS::Topic": "sns", "AWS::CloudWatch::Alarm": "cloudwatch",
	}
	for _, res := range tpl.Resources {
		if svc, ok := need[res.AWSCloudFormationType()]; ok && !slices.Contains(services, svc) {
			t.Errorf("the template needs %s, LocalStack does not start it", svc)
		}
	}
	for _, svc := range []string{"cloudformation", "cloudwatch", "sts"} {
		if !slices.Contains(services, svc) {
			t.Errorf("LocalStack does not start %s", svc)
		}
	}

	hook, err := os.ReadFile("init/ready.d/10-deploy.sh")
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat("init/ready.d/10-deploy.sh"); info.Mode()&0o111 == 0 {
		t.Error("the init hook is not executable")
	}
	text := string(hook)
	if !strings.Contains(text, "/opt/dlqq/infra/template.yaml") || !strings.Contains(text, "cloudformation deploy") {
		t.Error("the hook does not deploy infra/template.yaml")
	}
	// The template's rule AlarmDestinationIsRequired refuses a deploy that
	// pages nobody.
	if overrides := regexp.MustCompile(`--parameter-overrides (.*)`).FindStringSubmatch(text); overrides == nil ||
		!regexp.MustCompile(`(AlarmEmail|ExternalAlarmTopicArn)=[^\s"]+`).MatchString(overrides[1]) {
		t.Error("the hook's deploy sets neither AlarmEmail nor ExternalAlarmTopicArn: the template refuses it")
	}
	// A parameter without a default must be given ("Parameters: [X] must
	// have values").
	for name, p := range tpl.Parameters {
		if p.Default == nil && !regexp.MustCompile(`--parameter-overrides .*\b`+name+`=`).MatchString(text) {
			t.Errorf("the hook's deploy does not set %s, which has no default: CloudFormation refuses it", name)
		}
	}
	loop := regexp.MustCompile(`for fn in ([a-z ]+); do`).FindStringSubmatch(text)
	if loop == nil {
		t.Fatal("the hook uploads no function zips")
	}
	uploaded := strings.Fields(loop[1])
	for id := range tpl.GetAllServerlessFunctionResources() {
		name := strings.ToLower(strings.TrimSuffix(id, "Function"))
		if !slices.Contains(uploaded, name) || !strings.Contains(text, `id == "`+id+`"`) {
			t.Errorf("the hook does not package %s", id)
		}
	}
	if _, err := exec.LookPath("bash"); err == nil {
		if out, err := exec.Command("bash", "-n", "init/ready.d/10-deploy.sh").CombinedOutput(); err != nil {
			t.Errorf("hook syntax: %v %s", err, out)
		}
	}
	// The awk rewrite gives every function its own zip.
	if _, err := exec.LookPath("awk"); err == nil {
		prog := regexp.MustCompile(`(?s)awk -v bucket="\$\{artifacts\}" '(.*?)' /opt/dlqq`).FindStringSubmatch(text)
		if prog == nil {
			t.Fatal("no awk program in the hook")
		}
		cmd := exec.Command("awk", "-v", "bucket=dlqq-artifacts", prog[1], template.Path())
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("awk: %v", err)
		}
		for id := range tpl.GetAllServerlessFunctionResources() {
			name := strings.ToLower(strings.TrimSuffix(id, "Function"))
			if !strings.Contains(string(out), "CodeUri: s3://dlqq-artifacts/"+name+".zip") {
				t.Errorf("%s keeps a local CodeUri", id)
			}
		}
		if strings.Contains(string(out), "CodeUri: ../") {
			t.Error("a local CodeUri is left")
		}
	}
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^test-localstack:\n\tAWS_ENDPOINT_URL=`).Match(mk) {
		t.Error("make test-localstack does not point the suite at AWS_ENDPOINT_URL")
	}
}
