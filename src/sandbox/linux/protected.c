/* SPDX-License-Identifier: Apache-2.0 */
/* The built-in protections: one table of the paths a sandboxed command may
 * not read (credentials: masked) or may not change (what a login, a shell,
 * git, Python, systemd, a desktop session, an editor or an agent reads
 * and runs later on the host: read-only). docs/shinken-run.1.scd lists the
 * same table; keep the two together.
 *
 * A trailing '/' marks a directory: a missing one is masked by an empty
 * directory, so that what is left on the host for the mount point, until
 * `shinken run` removes it, has the expected type. A path is protected
 * after symlinks are resolved (plan.c), so a home reached through a
 * symlink, or a --write that resolves into one, is covered the same. A
 * missing path is masked only where something could be planted: inside a
 * writable root. Where a name lies: under the home directories ($HOME and
 * the password database's), under $XDG_CONFIG_HOME (default ~/.config),
 * $XDG_DATA_HOME (~/.local/share), $XDG_STATE_HOME (~/.local/state) or
 * $XDG_RUNTIME_DIR, at every writable root (only when it exists there: a
 * project's own tool configuration), or an absolute path. */
#include "plan-internal.h"

#define D SHK_ACCESS_DENY
#define R SHK_ACCESS_READ
#define HOME SHK__BASE_HOME
#define CONF SHK__BASE_CONFIG
#define DATA SHK__BASE_DATA
#define STATE SHK__BASE_STATE
#define RUNTIME SHK__BASE_RUNTIME
#define ROOTS SHK__BASE_ROOTS
#define ABS SHK__BASE_ABS

const shk__protected shk__protected_paths[] = {
  /* ---- credentials: masked ---- */
  /* ssh, gpg, kerberos, netrc */
  { HOME, ".ssh/", D }, { HOME, ".gnupg/", D }, { HOME, ".netrc", D }, { HOME, ".k5login", R },
  { HOME, ".pki/", D },
  /* git forges */
  { HOME, ".git-credentials", D }, { CONF, "git/credentials", D },
  { HOME, ".git-credential-cache/", D }, { HOME, ".cache/git/credential/", D },
  { CONF, "gh/", D }, { CONF, "glab-cli/", D }, { CONF, "hub", D }, { CONF, "tea/", D },
  { HOME, ".config/gitlab-runner/", D },
  /* package registries */
  { HOME, ".npmrc", D }, { HOME, ".yarnrc", D }, { HOME, ".yarnrc.yml", D },
  { HOME, ".bunfig.toml", D }, { CONF, "pnpm/", D }, { CONF, "yarn/", D },
  { HOME, ".pypirc", D }, { CONF, "pip/", D }, { HOME, ".pip/", D }, { CONF, "pypoetry/", D },
  { DATA, "python_keyring/", D }, { HOME, ".condarc", D },
  { HOME, ".cargo/credentials", D }, { HOME, ".cargo/credentials.toml", D },
  { HOME, ".gem/credentials", D }, { DATA, "gem/credentials", D }, { HOME, ".bundle/config", D },
  { HOME, ".m2/settings.xml", D }, { HOME, ".m2/settings-security.xml", D },
  { HOME, ".gradle/gradle.properties", D }, { HOME, ".ivy2/.credentials", D },
  { HOME, ".sbt/credentials", D }, { HOME, ".nuget/NuGet/NuGet.Config", D },
  { CONF, "NuGet/", D }, { HOME, ".composer/auth.json", D }, { CONF, "composer/auth.json", D },
  { HOME, ".pub-cache/credentials.json", D }, { CONF, "dart/pub-credentials.json", D },
  { HOME, ".hex/", D }, { HOME, ".cabal/config", D }, { HOME, ".stack/config.yaml", D },
  /* containers and clusters */
  { HOME, ".docker/", D }, { CONF, "containers/auth.json", D }, { HOME, ".kube/", D },
  { CONF, "helm/", D }, { HOME, ".minikube/", D }, { CONF, "k9s/", D }, { HOME, ".talos/", D },
  { HOME, ".lima/", D }, { HOME, ".colima/", D },
  /* infrastructure */
  { HOME, ".terraform.d/", D }, { HOME, ".terraformrc", D }, { HOME, ".pulumi/", D },
  { HOME, ".vault-token", D }, { HOME, ".ansible/", D }, { HOME, ".chef/", D },
  /* clouds */
  { HOME, ".aws/", D }, { CONF, "gcloud/", D }, { HOME, ".azure/", D }, { HOME, ".oci/", D },
  { CONF, "doctl/", D }, { HOME, ".config/heroku/", D }, { DATA, "heroku/", D },
  { HOME, ".fly/", D }, { DATA, "com.vercel.cli/", D }, { HOME, ".vercel/", D },
  { HOME, ".netlify/", D }, { CONF, "netlify/", D }, { CONF, "configstore/", D },
  { HOME, ".wrangler/", D }, { CONF, ".wrangler/", D }, { HOME, ".cloudflared/", D },
  { CONF, "hcloud/", D }, { CONF, "linode-cli", D }, { CONF, "scw/", D }, { HOME, ".ibmcloud/", D },
  { HOME, ".bluemix/", D }, { HOME, ".aliyun/", D }, { HOME, ".tccli/", D }, { HOME, ".cf/", D },
  { CONF, "openstack/", D }, { HOME, ".s3cfg", D }, { HOME, ".boto", D }, { CONF, "rclone/", D },
  { HOME, ".databrickscfg", D }, { HOME, ".snowsql/", D }, { HOME, ".snowflake/", D },
  { CONF, "stripe/", D }, { HOME, ".sentryclirc", D }, { HOME, ".circleci/", D },
  { HOME, ".travis/", D }, { HOME, ".railway/", D }, { HOME, ".render/", D },
  { CONF, "firebase/", D }, { HOME, ".supabase/", D },
  /* AI services and agents' own sign-ins */
  { HOME, ".claude/.credentials.json", D }, { CONF, "github-copilot/", D },
  { HOME, ".codex/auth.json", D }, { HOME, ".gemini/oauth_creds.json", D },
  { CONF, "openai/", D }, { HOME, ".huggingface/", D }, { HOME, ".cache/huggingface/token", D },
  /* database clients */
  { HOME, ".pgpass", D }, { HOME, ".my.cnf", D }, { HOME, ".mylogin.cnf", D },
  { HOME, ".mongorc.js", D }, { HOME, ".mongoshrc.js", D }, { HOME, ".mongosh/", D },
  { HOME, ".dbshell", D }, { HOME, ".cassandra/", D }, { HOME, ".redisclirc", D },
  { HOME, ".odbc.ini", D }, { HOME, ".influxdbv2/", D }, { DATA, "DBeaverData/", D },
  /* browsers, mail and chat: sessions, cookies, saved passwords */
  { HOME, ".mozilla/", D }, { HOME, ".librewolf/", D }, { HOME, ".waterfox/", D },
  { HOME, ".thunderbird/", D }, { CONF, "google-chrome/", D }, { CONF, "google-chrome-beta/", D },
  { CONF, "chromium/", D }, { CONF, "BraveSoftware/", D }, { CONF, "microsoft-edge/", D },
  { CONF, "vivaldi/", D }, { CONF, "opera/", D }, { CONF, "Slack/", D }, { CONF, "discord/", D },
  { CONF, "Signal/", D }, { DATA, "TelegramDesktop/", D }, { CONF, "Element/", D },
  { HOME, ".var/app/", D }, { HOME, "snap/", D },
  /* keyrings and password managers */
  { DATA, "keyrings/", D }, { HOME, ".password-store/", D }, { DATA, "kwalletd/", D },
  { CONF, "op/", D }, { HOME, ".op/", D }, { CONF, "Bitwarden CLI/", D },
  { CONF, "Bitwarden/", D }, { HOME, ".lastpass/", D }, { CONF, "keepassxc/", D },
  { HOME, ".local/share/keyrings/", D }, { HOME, ".Xauthority", D }, { HOME, ".ICEauthority", D },
  /* shell and REPL histories */
  { HOME, ".bash_history", D }, { HOME, ".zsh_history", D }, { HOME, ".zhistory", D },
  { HOME, ".histfile", D }, { HOME, ".sh_history", D }, { HOME, ".ash_history", D },
  { DATA, "fish/", D }, { HOME, ".python_history", D }, { HOME, ".node_repl_history", D },
  { HOME, ".psql_history", D }, { HOME, ".mysql_history", D }, { HOME, ".sqlite_history", D },
  { HOME, ".rediscli_history", D }, { HOME, ".irb_history", D }, { HOME, ".pry_history", D },
  { HOME, ".Rhistory", D }, { HOME, ".lesshst", D }, { HOME, ".viminfo", D },
  { HOME, ".julia/logs/", D }, { HOME, ".ipython/", D }, { DATA, "recently-used.xbel", D },
  /* Shinken's own state (the audit store and its signing key, a CA key)
   * and the managers' runtime directory. */
  { STATE, "shinken/", D }, { HOME, ".local/state/shinken/", D }, { ABS, "/var/lib/shinken/", D },
  { RUNTIME, "shinken/", D },

  /* ---- what runs later on the host: read-only ---- */
  /* login and shells */
  { HOME, ".profile", R }, { HOME, ".bashrc", R }, { HOME, ".bash_profile", R },
  { HOME, ".bash_login", R }, { HOME, ".bash_logout", R }, { HOME, ".bash_aliases", R },
  { HOME, ".bash_completion", R }, { HOME, ".bash_completion.d/", R }, { HOME, ".bashrc.d/", R },
  { HOME, ".inputrc", R }, { HOME, ".zshrc", R }, { HOME, ".zshenv", R }, { HOME, ".zprofile", R },
  { HOME, ".zlogin", R }, { HOME, ".zlogout", R }, { HOME, ".zsh/", R }, { HOME, ".oh-my-zsh/", R },
  { CONF, "zsh/", R }, { CONF, "fish/", R }, { HOME, ".kshrc", R }, { HOME, ".mkshrc", R },
  { HOME, ".cshrc", R }, { HOME, ".tcshrc", R }, { HOME, ".login", R }, { HOME, ".logout", R },
  { HOME, ".pam_environment", R }, { HOME, ".hushlogin", R }, { HOME, ".selected_editor", R },
  { CONF, "starship.toml", R }, { CONF, "direnv/", R }, { HOME, ".direnvrc", R },
  { CONF, "environment.d/", R }, { HOME, ".rhosts", R }, { HOME, ".shosts", R },
  { HOME, ".forward", R }, { HOME, ".procmailrc", R }, { HOME, ".mailcap", R },
  { HOME, ".muttrc", R }, { CONF, "mutt/", R },
  /* programs on $PATH and what version managers put there */
  { HOME, ".local/bin/", R }, { HOME, "bin/", R }, { HOME, ".cargo/bin/", R },
  { HOME, ".cargo/env", R }, { HOME, "go/bin/", R }, { HOME, ".rustup/", R }, { HOME, ".nvm/", R },
  { HOME, ".volta/", R }, { HOME, ".pyenv/", R }, { HOME, ".rbenv/", R }, { HOME, ".asdf/", R },
  { HOME, ".sdkman/", R }, { HOME, ".deno/bin/", R }, { HOME, ".bun/bin/", R },
  { HOME, ".npm-global/", R }, { DATA, "mise/", R }, { CONF, "mise/", R },
  { HOME, ".local/share/pnpm/", R },
  /* git (the repositories themselves: repos.c) */
  { HOME, ".gitconfig", R }, { CONF, "git/", R }, { HOME, ".gitattributes", R },
  { HOME, ".git-templates/", R }, { HOME, ".git/", R }, { HOME, "HEAD", R },
  /* language run-times' start-up and configuration */
  { HOME, ".local/lib/", R }, { HOME, ".pythonrc", R }, { HOME, ".pythonstartup", R },
  { HOME, ".pdbrc", R }, { HOME, ".jupyter/", R }, { HOME, ".pydistutils.cfg", R },
  { HOME, ".irbrc", R }, { HOME, ".pryrc", R }, { HOME, ".gemrc", R }, { HOME, ".Rprofile", R },
  { HOME, ".Renviron", R }, { HOME, ".julia/config/", R }, { HOME, ".ghci", R },
  { HOME, ".ocamlinit", R }, { HOME, ".erlang", R }, { HOME, ".iex.exs", R },
  { HOME, ".sbclrc", R }, { HOME, ".guile", R }, { HOME, ".octaverc", R }, { HOME, ".psqlrc", R },
  { HOME, ".sqliterc", R }, { HOME, ".gdbinit", R }, { CONF, "gdb/", R }, { HOME, ".lldbinit", R },
  { HOME, ".cargo/config", R }, { HOME, ".cargo/config.toml", R }, { CONF, "go/", R },
  { HOME, ".gradle/init.d/", R }, { HOME, ".gradle/init.gradle", R },
  { HOME, ".gradle/init.gradle.kts", R }, { HOME, ".mavenrc", R }, { HOME, ".m2/extensions.xml", R },
  { CONF, "powershell/", R }, { HOME, ".ansible.cfg", R }, { HOME, ".curlrc", R },
  { HOME, ".wgetrc", R }, { HOME, ".lesskey", R }, { CONF, "lesskey", R }, { HOME, ".asoundrc", R },
  /* editors */
  { HOME, ".vimrc", R }, { HOME, ".gvimrc", R }, { HOME, ".exrc", R }, { HOME, ".vim/", R },
  { CONF, "nvim/", R }, { DATA, "nvim/", R }, { HOME, ".emacs", R }, { HOME, ".emacs.el", R },
  { HOME, ".emacs.d/", R }, { CONF, "emacs/", R }, { HOME, ".nanorc", R }, { CONF, "helix/", R },
  { HOME, ".vscode/", R }, { HOME, ".vscode-server/", R }, { CONF, "Code/", R },
  { CONF, "Code - OSS/", R }, { CONF, "VSCodium/", R }, { HOME, ".cursor/", R },
  { CONF, "Cursor/", R }, { HOME, ".windsurf/", R }, { HOME, ".codeium/", R },
  { CONF, "JetBrains/", R }, { DATA, "JetBrains/", R }, { HOME, ".idea/", R },
  { CONF, "sublime-text/", R }, { CONF, "zed/", R },
  /* agents and their tool servers */
  { HOME, ".claude/", R }, { HOME, ".claude.json", R }, { HOME, ".mcp.json", R },
  { HOME, ".codex/", R }, { HOME, ".gemini/", R }, { HOME, ".continue/", R },
  { HOME, ".aider.conf.yml", R }, { CONF, "opencode/", R }, { CONF, "goose/", R },
  { CONF, "shinken/", R },
  /* terminals, multiplexers and the desktop session */
  { HOME, ".tmux.conf", R }, { CONF, "tmux/", R }, { HOME, ".screenrc", R },
  { CONF, "kitty/", R }, { CONF, "alacritty/", R }, { HOME, ".wezterm.lua", R },
  { CONF, "wezterm/", R }, { HOME, ".xprofile", R }, { HOME, ".xsession", R },
  { HOME, ".xsessionrc", R }, { HOME, ".xinitrc", R }, { HOME, ".xserverrc", R },
  { HOME, ".Xresources", R }, { HOME, ".Xdefaults", R }, { HOME, ".Xmodmap", R },
  { HOME, ".gnomerc", R }, { CONF, "autostart/", R }, { CONF, "autostart-scripts/", R },
  { CONF, "plasma-workspace/", R }, { HOME, ".kde/", R }, { CONF, "systemd/", R },
  { DATA, "systemd/", R }, { DATA, "applications/", R }, { DATA, "dbus-1/", R },
  { DATA, "gnome-shell/", R }, { DATA, "nautilus/", R }, { DATA, "kservices5/", R },
  { DATA, "plasma/", R }, { CONF, "mimeapps.list", R }, { CONF, "dconf/", R },
  { CONF, "i3/", R }, { CONF, "sway/", R }, { CONF, "hypr/", R }, { CONF, "openbox/", R },
  { CONF, "labwc/", R }, { CONF, "lxsession/", R }, { CONF, "user-dirs.dirs", R },

  /* ---- at every writable root, where they exist: a project's tool
   * configuration that runs when the directory is opened by an editor or
   * an agent, entered by a shell (direnv), or committed to ---- */
  { ROOTS, ".vscode/", R }, { ROOTS, ".idea/", R }, { ROOTS, ".claude/", R },
  { ROOTS, ".cursor/", R }, { ROOTS, ".windsurf/", R }, { ROOTS, ".gemini/", R },
  { ROOTS, ".codex/", R }, { ROOTS, ".continue/", R }, { ROOTS, ".mcp.json", R },
  { ROOTS, ".claude.json", R }, { ROOTS, ".envrc", R }, { ROOTS, ".devcontainer/", R },
  { ROOTS, ".gitconfig", R }, { ROOTS, ".gitmodules", R }, { ROOTS, ".bashrc", R },
  { ROOTS, ".bash_profile", R }, { ROOTS, ".zshrc", R }, { ROOTS, ".zprofile", R },
  { ROOTS, ".profile", R }, { ROOTS, ".ripgreprc", R }, { ROOTS, ".pre-commit-config.yaml", R },
  { ROOTS, ".husky/", R }, { ROOTS, "lefthook.yml", R }, { ROOTS, ".lefthook.yml", R },
  { ROOTS, ".npmrc", R }, { ROOTS, ".yarnrc.yml", R },

  { 0, NULL, 0 },
};

/* For a caller that is root outside, who stays the owner of root's files
 * inside (kuid 0, no capability needed for that): the usual owner-only
 * secrets of the host. Any other such file is readable (docs/sandbox.md). */
const char *const shk__root_masked[] = {
  "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
  "/etc/ssh/ssh_host_rsa_key", "/etc/ssh/ssh_host_ecdsa_key", "/etc/ssh/ssh_host_ed25519_key",
  "/etc/ssh/ssh_host_dsa_key", NULL,
};
