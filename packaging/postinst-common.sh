# Shared by the .deb postinst and the .rpm %post (packaging/build.sh pastes it in).
# Generates the admin API token once, prints where it is; never changes the configuration,
# so automatic responses stay in dry run (decision 334).
# The .deb does not ship /var/lib/svc (decision 441); it is root's only (store, control
# socket, quarantine, TLS key).
[ -d /var/lib/svc ] || mkdir -m 0700 /var/lib/svc
token_file=/etc/svc/conf.d/admin-token.toml
if [ ! -e "$token_file" ]; then
    old_umask=$(umask)
    umask 077
    mkdir -p /etc/svc/conf.d
    token=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
    tmp="$token_file.tmp.$$"
    printf '# The admin API token generated at install; see svc.toml(5), [[webui.tokens]].\n[[webui.tokens]]\nname = "package-admin"\ntoken = "%s"\nscope = "admin"\n' "$token" >"$tmp"
    chmod 0600 "$tmp"
    mv "$tmp" "$token_file"
    umask "$old_umask"
fi
chmod 0700 /var/lib/svc
echo "svc: the admin API token is in $token_file (readable by root only)."
echo "svc: automatic responses stay in dry run; review /etc/svc/svc.toml (svc.toml(5)),"
echo "svc: check it with 'svc validate', then start the service: systemctl enable --now svc"
