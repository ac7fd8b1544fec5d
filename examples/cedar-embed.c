/* SPDX-License-Identifier: Apache-2.0 */
/* Embedding Shinken's Cedar engine: parse a schema and policies, check the
 * policies against the schema, link a template, load the entities once,
 * then decide several requests and print each decision with its reasons.
 * Errors are shown too: a policy text that does not parse, and a request
 * the schema rejects.
 *
 * Build against an installed Shinken:
 *   cc cedar-embed.c $(pkg-config --cflags --libs shinken) -o cedar-embed */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shinken/cedar.h"

static const char schema_text[] =
  "entity Session { trust_tier: String };\n"
  "entity Agent in [Session] { model: String };\n"
  "entity Capability { class: String, tier: String };\n"
  "action UseCapability appliesTo {\n"
  "  principal: Agent, resource: Capability,\n"
  "  context: { approval_state: String }\n"
  "};\n";

/* Four policies and a template. The @id annotations name them for people;
 * the engine's own ids are policy0, policy1, ... in file order. */
static const char policy_text[] =
  "@id(\"auto-tier\")\n"
  "permit(principal, action == Action::\"UseCapability\", resource)\n"
  "when { resource.tier == \"Auto\" };\n"
  "\n"
  "@id(\"approved-egress\")\n"
  "permit(principal, action == Action::\"UseCapability\", resource is Capability)\n"
  "when { resource.class == \"net.egress\" && context.approval_state == \"approved\" };\n"
  "\n"
  "@id(\"untrusted-session\")\n"
  "forbid(principal in Session::\"s-untrusted\", action, resource)\n"
  "unless { resource.tier == \"Auto\" };\n"
  "\n"
  "@id(\"session-grant\")\n"
  "permit(principal in ?principal, action == Action::\"UseCapability\", resource == ?resource);\n";

static const char entities_json[] =
  "["
  "{\"uid\":{\"type\":\"Session\",\"id\":\"s1\"},\"attrs\":{\"trust_tier\":\"standard\"},\"parents\":[]},"
  "{\"uid\":{\"type\":\"Session\",\"id\":\"s-untrusted\"},\"attrs\":{\"trust_tier\":\"low\"},\"parents\":[]},"
  "{\"uid\":{\"type\":\"Agent\",\"id\":\"a1\"},\"attrs\":{\"model\":\"m1\"},"
  "\"parents\":[{\"type\":\"Session\",\"id\":\"s1\"}]},"
  "{\"uid\":{\"type\":\"Agent\",\"id\":\"a2\"},\"attrs\":{\"model\":\"m1\"},"
  "\"parents\":[{\"type\":\"Session\",\"id\":\"s-untrusted\"}]},"
  "{\"uid\":{\"type\":\"Capability\",\"id\":\"clipboard\"},\"attrs\":{\"class\":\"clipboard\",\"tier\":\"Auto\"},\"parents\":[]},"
  "{\"uid\":{\"type\":\"Capability\",\"id\":\"net\"},\"attrs\":{\"class\":\"net.egress\",\"tier\":\"Ask\"},\"parents\":[]},"
  "{\"uid\":{\"type\":\"Capability\",\"id\":\"gpu0\"},\"attrs\":{\"class\":\"gpu\",\"tier\":\"Ask\"},\"parents\":[]}"
  "]";

struct example_request {
  const char *principal, *resource, *context;
};

static const struct example_request requests[] = {
  { "Agent::\"a1\"", "Capability::\"clipboard\"", "{\"approval_state\":\"none\"}" },
  { "Agent::\"a1\"", "Capability::\"net\"", "{\"approval_state\":\"approved\"}" },
  { "Agent::\"a1\"", "Capability::\"net\"", "{\"approval_state\":\"pending\"}" },
  { "Agent::\"a1\"", "Capability::\"gpu0\"", "{\"approval_state\":\"none\"}" },
  { "Agent::\"a2\"", "Capability::\"net\"", "{\"approval_state\":\"approved\"}" },
  /* The schema says the resource must be a Capability: rejected. */
  { "Agent::\"a1\"", "Session::\"s1\"", "{\"approval_state\":\"none\"}" },
};

/* Prints one policy id with its @id annotation when it has one. */
static void print_policy(const shk_cedar_policy_set *ps, const char *id)
{
  char name[128];
  if (shk_cedar_policy_annotation(ps, id, "id", name, sizeof name) >= 0)
    printf(" %s (@id %s)", id, name);
  else
    printf(" %s", id);
}

int main(void)
{
  shk_error err = { 0 };
  int status = 1;
  shk_cedar_schema *schema = NULL;
  shk_cedar_policy_set *ps = NULL;
  shk_cedar_entities *es = NULL;
  shk_cedar_response resp = { 0 };
  shk_cedar_validation_result vr = { 0 };

  /* A parse error carries a message and the place in the text. */
  static const char broken[] = "permit(principal, action, resource) when { principal. };";
  shk_cedar_policy_set *bad = NULL;
  if (shk_cedar_policy_set_parse(broken, strlen(broken), &bad, &err) < 0)
    printf("broken policy rejected at %u:%u: %s\n", err.line, err.column, err.message);
  else
    shk_cedar_policy_set_free(bad);

  if (shk_cedar_schema_parse(schema_text, strlen(schema_text), SHK_CEDAR_SCHEMA_TEXT, &schema,
                             &err) < 0) {
    fprintf(stderr, "schema: %u:%u: %s\n", err.line, err.column, err.message);
    goto out;
  }
  if (shk_cedar_policy_set_parse(policy_text, strlen(policy_text), &ps, &err) < 0) {
    fprintf(stderr, "policies: %u:%u: %s\n", err.line, err.column, err.message);
    goto out;
  }
  /* The template (policy3) granted to session s1 for one capability. */
  if (shk_cedar_policy_set_link(ps, "policy3", "grant-s1-gpu0", "Session::\"s1\"",
                                "Capability::\"gpu0\"", &err) < 0) {
    fprintf(stderr, "link: %s\n", err.message);
    goto out;
  }
  if (shk_cedar_validate(ps, schema, &vr) < 0) {
    fprintf(stderr, "validation could not run\n");
    goto out;
  }
  for (size_t i = 0; i < vr.n_errors; i++)
    fprintf(stderr, "invalid: %s: %u:%u: %s\n", vr.errors[i].policy_id, vr.errors[i].line,
            vr.errors[i].column, vr.errors[i].message);
  if (vr.n_errors)
    goto out;
  printf("%zu policies, templates and links; valid against the schema\n",
         shk_cedar_policy_set_count(ps));

  /* The store is parsed once, with the schema typing its attributes. */
  if (shk_cedar_entities_parse(entities_json, strlen(entities_json), schema, &es, &err) < 0) {
    fprintf(stderr, "entities: %s\n", err.message);
    goto out;
  }

  for (size_t i = 0; i < sizeof requests / sizeof *requests; i++) {
    const struct example_request *q = &requests[i];
    shk_cedar_request *req = NULL;
    printf("%s UseCapability %s: ", q->principal, q->resource);
    if (shk_cedar_request_new(q->principal, "Action::\"UseCapability\"", q->resource, q->context,
                              schema, true, &req, &err) < 0) {
      printf("rejected: %s\n", err.message);
      continue;
    }
    /* The same response is reused: after the first call, deciding does
     * not allocate. Its strings stay valid until the next call. */
    if (shk_cedar_is_authorized(ps, es, req, &resp) < 0) {
      printf("could not be decided\n");
      shk_cedar_request_free(req);
      goto out;
    }
    printf("%s", resp.decision == SHK_CEDAR_ALLOW ? "ALLOW" : "DENY");
    if (resp.n_reasons)
      printf(" by");
    for (size_t k = 0; k < resp.n_reasons; k++)
      print_policy(ps, resp.reasons[k]);
    for (size_t k = 0; k < resp.n_errors; k++)
      printf("; error in %s: %s", resp.errors[k].policy_id, resp.errors[k].message);
    printf("\n");
    shk_cedar_request_free(req);
  }
  status = 0;
out:
  shk_cedar_response_clear(&resp);
  shk_cedar_validation_result_clear(&vr);
  shk_cedar_entities_free(es);
  shk_cedar_policy_set_free(ps);
  shk_cedar_schema_free(schema);
  return status;
}
