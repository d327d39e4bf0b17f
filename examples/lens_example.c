/* SPDX-License-Identifier: Apache-2.0 */
/* Records NeMo Lens inference, RL and Gym metrics from C.
 *
 * Build against an installed copy:
 *     cc lens_example.c $(pkg-config --cflags --libs nemolens) -o lens_example
 * Run, exporting to an OTLP/HTTP collector:
 *     OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318 ./lens_example
 * or print the export as OTLP/JSON instead:
 *     OTEL_METRICS_EXPORTER=console ./lens_example
 *
 * The values are fixed, so the output is easy to check:
 *   gen_ai.server.request.duration  model llama-3-8b: 0.25 s, 0.5 s; model mistral-7b: 1.5 s
 *   gen_ai.client.token.usage       llama-3-8b input 128+256, output 64+32;
 *                                   mistral-7b input 1000, output 10
 *   rl.reward.mean 0.75, rl.policy_loss 0.3, rl.learning_rate 3e-06 (last of 3 steps),
 *   rl.generation.duration_ms 450 + 500 + 550, rl.rollout.duration_ms 2300 (once)
 *   gym.verify.duration_ms 120, gym.verify.success_rate 0.5, gym.servers.active 4
 *
 * With `--connect PORT` it first opens (and closes) one TCP connection to
 * 127.0.0.1:PORT, as a program talking to its inference server would: linked
 * with libnemolens.so, that connection is not counted (nothing is interposed);
 * run under LD_PRELOAD=libnemolens_preload.so, it is.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nemolens.h>

static int connect_once(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
	close(fd);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--connect") == 0 && connect_once(atoi(argv[2])) != 0) {
		perror("connect");
		return 1;
	}

	/* A meter of our own; NULL (or nemolens_meter_default()) would do as well. */
	nemolens_meter *meter = nemolens_meter_get("lens_example");

	/* Inference: only the fields given are recorded; operation and provider
	 * default to text_completion and nemo. */
	nemolens_record_inference_metrics(meter, .request_duration_s = NEMOLENS_F64(0.25), .model = "llama-3-8b",
					  .input_tokens = NEMOLENS_I64(128), .output_tokens = NEMOLENS_I64(64));
	nemolens_record_inference_metrics(meter, .request_duration_s = NEMOLENS_F64(0.5), .model = "llama-3-8b",
					  .input_tokens = NEMOLENS_I64(256), .output_tokens = NEMOLENS_I64(32));
	nemolens_record_inference_metrics(meter, .request_duration_s = NEMOLENS_F64(1.5), .model = "mistral-7b",
					  .input_tokens = NEMOLENS_I64(1000), .output_tokens = NEMOLENS_I64(10));

	/* RL: three training steps; gauges keep the last value. */
	static const double reward[3] = { 0.25, 0.5, 0.75 };
	for (int step = 0; step < 3; step++)
		nemolens_record_rl_metrics(meter, .reward_mean = NEMOLENS_F64(reward[step]),
					   .policy_loss = NEMOLENS_F64(0.3), .learning_rate = NEMOLENS_F64(3e-6),
					   .generation_duration_ms = NEMOLENS_F64(450 + 50 * step));
	/* Filling a struct works too (and is how C++ and ctypes call it). */
	struct nemolens_rl_metrics rl = { 0 };
	rl.rollout_duration_ms = nemolens_f64(2300);
	nemolens_record_rl(meter, &rl, sizeof rl);

	/* Gym. */
	nemolens_record_gym_metrics(meter, .verify_duration_ms = NEMOLENS_F64(120),
				    .verify_success_rate = NEMOLENS_F64(0.5), .active_servers = NEMOLENS_I64(4));

	printf("nemolens %s: %s\n", nemolens_version(),
	       nemolens_enabled() ? "recorded; exported at exit" : "disabled, nothing recorded");
	/* Released: its series go out once more (here with the exit flush),
	 * then no longer. */
	nemolens_meter_release(meter);
	return 0;
}
