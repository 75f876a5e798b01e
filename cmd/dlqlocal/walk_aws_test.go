package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// asAWS makes this test binary the stand-in for the AWS CLI (walkEnv puts
// it on PATH as `aws` when none is installed).
const asAWS = "DLQLOCAL_TEST_AS_AWS"

// awsStandIn runs the few AWS CLI commands docs/local.md shows, with the
// CLI's flags and output, through the SDK (configured from the same
// environment: AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_S3, the credentials).
// Any other command is refused with exit 2, so a page that shows a new
// kind of aws command fails the walk until the stand-in or a CLI runs it.
func awsStandIn(args []string, stdout, stderr io.Writer) int {
	if len(args) < 2 {
		fmt.Fprintln(stderr, "aws stand-in: want SERVICE COMMAND")
		return 2
	}
	// The flags the page uses: --recursive takes no value,
	// --attribute-names several, the others one.
	flags, pos := map[string][]string{}, []string{}
	for i := 2; i < len(args); i++ {
		name, isFlag := strings.CutPrefix(args[i], "--")
		switch {
		case !isFlag:
			pos = append(pos, args[i])
		case name == "recursive":
			flags[name] = nil
		case name == "attribute-names":
			for i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
				i++
				flags[name] = append(flags[name], args[i])
			}
		case i+1 < len(args):
			i++
			flags[name] = append(flags[name], args[i])
		}
	}
	one := func(name string) string {
		if v := flags[name]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 255
	}
	if e := one("endpoint-url"); e != "" {
		cfg.BaseEndpoint = aws.String(e)
	}
	err = errors.New("aws stand-in: not a command it runs")
	code := 2
	switch args[0] + " " + args[1] {
	case "lambda list-functions":
		out, e := lambda.NewFromConfig(cfg).ListFunctions(ctx, &lambda.ListFunctionsInput{})
		if err, code = e, 255; e == nil && one("query") == "Functions[].FunctionName" && one("output") == "text" {
			var names []string
			for _, f := range out.Functions {
				names = append(names, aws.ToString(f.FunctionName))
			}
			fmt.Fprintln(stdout, strings.Join(names, "\t"))
			return 0
		}
	case "lambda invoke":
		payload, e := os.ReadFile(strings.TrimPrefix(one("payload"), "fileb://"))
		if err, code = e, 255; e == nil && len(pos) == 1 {
			out, e := lambda.NewFromConfig(cfg).Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(one("function-name")), Payload: payload})
			if err = e; e == nil {
				if err = os.WriteFile(pos[0], out.Payload, 0o600); err == nil {
					meta := map[string]any{"StatusCode": out.StatusCode, "ExecutedVersion": aws.ToString(out.ExecutedVersion)}
					if out.FunctionError != nil {
						meta["FunctionError"] = *out.FunctionError
					}
					b, _ := json.MarshalIndent(meta, "", "    ")
					fmt.Fprintln(stdout, string(b))
					return 0
				}
			}
		}
	case "sqs send-message", "sqs get-queue-attributes", "sqs tag-queue", "sqs list-queue-tags":
		if one("endpoint-url") == "" {
			// As the AWS CLI v1 does (docs/local.md): without the flag its SQS
			// goes to queue.amazonaws.com, whatever AWS_ENDPOINT_URL says.
			fmt.Fprintln(stderr, `Could not connect to the endpoint URL: "https://queue.amazonaws.com/" (the stand-in, as CLI v1: sqs needs --endpoint-url)`)
			return 255
		}
	}
	switch args[0] + " " + args[1] {
	case "sqs send-message":
		body, e := os.ReadFile(strings.TrimPrefix(one("message-body"), "file://"))
		if err, code = e, 255; e == nil {
			in := &sqs.SendMessageInput{QueueUrl: aws.String(one("queue-url")), MessageBody: aws.String(string(body))}
			if g := one("message-group-id"); g != "" {
				in.MessageGroupId, in.MessageDeduplicationId = aws.String(g), aws.String(one("message-deduplication-id"))
			}
			out, e := sqs.NewFromConfig(cfg).SendMessage(ctx, in)
			if err = e; e == nil && one("query") == "MessageId" && one("output") == "text" {
				fmt.Fprintln(stdout, aws.ToString(out.MessageId))
				return 0
			}
		}
	case "sqs get-queue-attributes":
		var names []sqstypes.QueueAttributeName
		for _, n := range flags["attribute-names"] {
			names = append(names, sqstypes.QueueAttributeName(n))
		}
		out, e := sqs.NewFromConfig(cfg).GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(one("queue-url")), AttributeNames: names})
		if err, code = e, 255; e == nil {
			b, _ := json.MarshalIndent(map[string]any{"Attributes": out.Attributes}, "", "    ")
			fmt.Fprintln(stdout, string(b))
			return 0
		}
	case "sqs tag-queue":
		// --tags in the CLI's shorthand: k=v[,k=v…].
		tags := map[string]string{}
		for _, kv := range strings.Split(one("tags"), ",") {
			if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
				tags[k] = v
			}
		}
		if err = fmt.Errorf("aws stand-in: --tags %q is not k=v[,k=v…]", one("tags")); len(tags) > 0 {
			_, e := sqs.NewFromConfig(cfg).TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: aws.String(one("queue-url")), Tags: tags})
			if err, code = e, 255; e == nil {
				return 0
			}
		}
	case "sqs list-queue-tags":
		out, e := sqs.NewFromConfig(cfg).ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(one("queue-url"))})
		if err, code = e, 255; e == nil {
			b, _ := json.MarshalIndent(map[string]any{"Tags": out.Tags}, "", "    ")
			fmt.Fprintln(stdout, string(b))
			return 0
		}
	case "s3 ls":
		url, given := strings.CutPrefix(strings.Join(pos, ""), "s3://")
		if _, recursive := flags["recursive"]; !given || !recursive {
			break // the page lists with --recursive only: keys, not folders
		}
		bucket, prefix, _ := strings.Cut(url, "/")
		c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
		p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
		for p.HasMorePages() {
			page, e := p.NextPage(ctx)
			if e != nil {
				fmt.Fprintln(stderr, e)
				return 1
			}
			for _, o := range page.Contents {
				fmt.Fprintf(stdout, "%s %10d %s\n", aws.ToTime(o.LastModified).Local().Format("2006-01-02 15:04:05"), aws.ToInt64(o.Size), aws.ToString(o.Key))
			}
		}
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n", strings.Join(args, " "), err)
	return code
}
