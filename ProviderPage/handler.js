// The emulator's provider page (GET /emulator/auth/handler): the account chooser the SDKs open in place of an
// identity provider's sign-in. It produces what the official Auth emulator's page produces:
//   urlResponse = this page's URL without its query + "?providerId=<id>&id_token=<URI-encoded claims JSON>"
//                 (+ "&SAMLResponse=<URI-encoded JSON>" for saml.* providers),
//   the AuthEvent {type, eventId, urlResponse, sessionId, postBody, tenantId, error},
// and hands it back: popups through the opener's helper iframe (postMessage), redirects through sessionStorage and
// the redirect URL, Android through an intent:// link, iOS through a deep link.
// Server text (names, emails, URLs) only ever becomes text nodes or element properties: nothing here parses HTML.
'use strict';

(function () {
  var query = new URLSearchParams(location.search);
  var apiKey = query.get('apiKey');
  var appName = query.get('appName');
  var tenantId = query.get('tid');
  var authType = query.get('authType');
  var providerId = query.get('providerId') || '';
  var redirectUrl = query.get('redirectUrl');
  var eventId = query.get('eventId');
  var storageKey = apiKey + ':' + appName;
  var clientId = query.get('clientId');
  var firebaseAppId = query.get('appId');
  var apn = query.get('apn');
  var ibi = query.get('ibi');
  var appIdentifier = apn || ibi;
  var isSamlProvider = /^saml\./.test(providerId);

  var $ = function (id) { return document.getElementById(id); };

  /// Stops the page with a message people can read (and the console's error for whoever debugs).
  function fatal(message) {
    var box = $('fatal');
    box.textContent = message;
    box.hidden = false;
    $('accounts-list').hidden = true;
    $('add-user').hidden = true;
    $('warning').hidden = true;
    box.setAttribute('tabindex', '-1');
    box.focus();
    throw new Error(message);
  }

  var formattedProviderId = providerId ? providerId[0].toUpperCase() + providerId.substring(1) : 'a provider';
  document.querySelectorAll('.js-provider-id').forEach(function (e) { e.textContent = formattedProviderId; });
  document.title = 'Sign in with ' + formattedProviderId + ' · Auth emulator';

  var internalError = query.get('error');
  if (internalError) fatal(internalError);
  if (!(appName || clientId || firebaseAppId || appIdentifier)) {
    fatal('Auth Emulator Internal Error: Missing one of appName / clientId / appId / apn / ibi query params.');
  }

  // Flows that exist only in the emulator.
  if ((providerId === 'facebook.com' && appIdentifier) || (providerId === 'apple.com' && ibi)) {
    var providerName = providerId === 'facebook.com' ? 'Facebook' : 'Apple';
    var productionMethod = providerName + (apn ? ' Android SDK' : ' iOS SDK');
    $('warning').textContent = 'Sign-in with ' + providerName + ' via generic IDP is only supported in the Auth Emulator; ' +
      'remember to switch to ' + productionMethod + ' for production Firebase projects.';
    $('warning').hidden = false;
  }

  // ---- the result --------------------------------------------------------------------------------------------

  /// Digits from the browser's CSPRNG (rejection sampling: each digit uniform).
  function randomDigits(n) {
    var out = '';
    var buf = new Uint8Array(64);
    while (out.length < n) {
      crypto.getRandomValues(buf);
      for (var i = 0; i < buf.length && out.length < n; i++) if (buf[i] < 250) out += String(buf[i] % 10);
    }
    return out;
  }

  /// The claims the official page puts in `id_token`, in its key order (undefined values are left out by
  /// JSON.stringify, as there).
  function claimsJSON(sub, info) {
    return JSON.stringify({
      sub: sub,
      iss: '',
      aud: '',
      exp: 0,
      iat: 0,
      name: info.displayName,
      screen_name: info.screenName,
      email: info.email,
      email_verified: true,
      picture: info.photoUrl,
    });
  }

  function finishWithUser(claims, email) {
    // This page's URL with its query replaced (no apiKey etc.).
    var url = location.href.split('?')[0];
    url += '?providerId=' + encodeURIComponent(providerId);
    url += '&id_token=' + encodeURIComponent(claims);
    if (isSamlProvider) {
      url += '&SAMLResponse=' + encodeURIComponent(JSON.stringify({ assertion: { subject: { nameId: email } } }));
    }
    saveAuthEvent({
      type: authType,
      eventId: eventId,
      urlResponse: url,
      sessionId: 'ValueNotUsedByAuthEmulator',
      postBody: '',
      tenantId: tenantId,
      error: null,
    });
  }

  function saveAuthEvent(authEvent) {
    if (/popup/i.test(authType)) {
      if (!sendAuthEventViaIframeRelay(authEvent)) {
        fatal('Auth Emulator Internal Error: No matching frame (the window that opened this page has no ' +
          'emulator/auth/iframe for apiKey "' + apiKey + '" and appName "' + appName + '").');
      }
      done('Signed in. The app takes it from here; this window closes by itself.');
    } else if (apn) {
      redirectToAndroid(authEvent);
    } else if (ibi) {
      redirectToIos(authEvent);
    } else if (redirectUrl) {
      var target = safeRedirect(redirectUrl);
      sessionStorage['firebase:redirectEvent:' + storageKey] = JSON.stringify(authEvent);
      done('Signed in. Going back to the app…');
      window.location.assign(target);
    } else {
      fatal('This feature is not implemented in Auth Emulator yet. Please use signInWithCredential for now.');
    }
  }

  function done(text) {
    $('status').textContent = text;
    $('accounts-list').hidden = true;
    $('add-user').hidden = true;
  }

  /// Posts the event to every frame of the opener that is this emulator's helper iframe for the same app (those are
  /// same-origin with this page, so their location can be read; other frames throw and are skipped).
  function sendAuthEventViaIframeRelay(authEvent) {
    var sent = false;
    if (!window.opener) return false;
    for (var i = 0; i < window.opener.frames.length; i++) {
      try {
        var frame = window.opener.frames[i];
        var q = new URLSearchParams(frame.location.search);
        if (q.get('apiKey') === apiKey && q.get('appName') === appName) {
          frame.postMessage({
            data: { authEvent: authEvent, storageKey: storageKey },
            eventId: randomDigits(20).replace(/^0+(?=\d)/, ''),
            eventType: 'sendAuthEvent',
          }, '*');
          sent = true;
        }
      } catch (e) {
        // Another origin's frame.
      }
    }
    return sent;
  }

  /// A redirect target the page may navigate to: an absolute URL, not a script or data URL.
  function safeRedirect(u) {
    var parsed;
    try { parsed = new URL(u); } catch (e) { fatal('Auth Emulator Internal Error: redirectUrl is not a URL.'); }
    if (/^(javascript|data|vbscript|blob|file):$/i.test(parsed.protocol)) {
      fatal('Auth Emulator Internal Error: redirectUrl may not be a ' + parsed.protocol + ' URL.');
    }
    return parsed.href;
  }

  /// An app id as Android and iOS spell them (package names, bundle ids, client ids): no characters that could end
  /// an intent's field or change a URL's meaning.
  function checkIdentifier(name, value) {
    if (!/^[A-Za-z0-9._:-]{1,255}$/.test(value)) fatal('Auth Emulator Internal Error: invalid ' + name + ' query parameter.');
    return value;
  }

  function redirectToAndroid(authEvent) {
    checkIdentifier('apn', apn);
    // Shown when no app handles the link.
    var fallbackUrl = window.location.href + '&error=App+not+found+for+intent';
    var link = 'intent://firebase.auth/#Intent;scheme=genericidp;' +
      'package=' + apn + ';' +
      'S.authType=' + authEvent.type + ';';
    if (authEvent.eventId) link += 'S.eventId=' + authEvent.eventId + ';';
    link += 'S.link=' + encodeURIComponent(authEvent.urlResponse) + ';';
    link += 'B.encryptionEnabled=false;';
    link += 'S.browser_fallback_url=' + encodeURIComponent(fallbackUrl) + ';';
    link += 'end;';
    done('Signed in. Going back to the app…');
    window.location.replace(link);
  }

  function redirectToIos(authEvent) {
    // The production handler's format, which the iOS SDK knows; /__/auth/callback need not exist.
    var url = window.location.protocol + '//' + window.location.host +
      '/__/auth/callback?authType=' + encodeURIComponent(authEvent.type) +
      '&link=' + encodeURIComponent(authEvent.urlResponse);
    if (authEvent.eventId) url += '&eventId=' + authEvent.eventId;
    var scheme;
    if (clientId) scheme = checkIdentifier('clientId', clientId).split('.').reverse().join('.');
    else if (firebaseAppId) scheme = 'app-' + checkIdentifier('appId', firebaseAppId).replace(/:/g, '-');
    else scheme = checkIdentifier('ibi', appIdentifier);
    if (!/^[A-Za-z][A-Za-z0-9+.-]*$/.test(scheme) || /^(javascript|data|vbscript|blob|file|https?)$/i.test(scheme)) {
      fatal('Auth Emulator Internal Error: cannot make a URL scheme of "' + scheme + '".');
    }
    var deepLink = scheme + '://' + (clientId || firebaseAppId ? 'firebaseauth' : 'google') + '/link';
    deepLink += '?deep_link_id=' + encodeURIComponent(url);
    done('Signed in. Going back to the app…');
    window.location.replace(deepLink);
  }

  // ---- the account list --------------------------------------------------------------------------------------

  var data = {};
  try { data = JSON.parse($('accounts-data').textContent) || {}; } catch (e) { data = {}; }
  var accounts = Array.isArray(data.accounts) ? data.accounts : [];

  /// A photo URL the page shows: http(s) only (anything else is left out, the icon shows instead).
  function photoSource(u) {
    if (typeof u !== 'string' || !u) return null;
    try {
      var parsed = new URL(u);
      return parsed.protocol === 'http:' || parsed.protocol === 'https:' ? parsed.href : null;
    } catch (e) { return null; }
  }

  function el(tag, className, text) {
    var e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function accountItem(account, index) {
    var button = el('button', 'account');
    button.type = 'button';
    button.setAttribute('data-index', String(index));
    var src = photoSource(account.photoUrl);
    var avatar;
    if (src) {
      avatar = el('img', 'avatar');
      avatar.alt = '';
      avatar.referrerPolicy = 'no-referrer';
      avatar.src = src;
    } else {
      avatar = el('span', 'avatar placeholder', (account.displayName || account.email || '?').trim().charAt(0).toUpperCase() || '?');
      avatar.setAttribute('aria-hidden', 'true');
    }
    var text = el('span', 'text');
    text.append(el('span', 'primary', account.displayName || '(No display name)'));
    text.append(el('span', 'secondary', account.email || ''));
    button.append(avatar, text);
    button.addEventListener('click', function () {
      finishWithUser(claimsJSON(String(account.rawId), account), account.email);
    });
    var li = el('li');
    li.append(button);
    return li;
  }

  var list = $('accounts');
  accounts.forEach(function (a, i) { list.append(accountItem(a, i)); });
  if (data.withheld === 'admin-token') {
    $('accounts-help').textContent = 'Existing accounts are not listed: this emulator runs with --admin-token. Add an account:';
  } else if (data.withheld === 'foreign-origin') {
    $('accounts-help').textContent = 'Existing accounts are not listed to pages of another site. Add an account:';
  } else if (!accounts.length) {
    $('accounts-help').textContent = 'No ' + formattedProviderId + ' accounts exist in the Auth Emulator.';
  }
  if (typeof data.total === 'number' && data.total > accounts.length) {
    $('accounts-note').textContent = 'Showing the ' + accounts.length + ' newest of ' + data.total + ' ' + formattedProviderId +
      ' accounts. Add one to sign in as someone else.';
    $('accounts-note').hidden = false;
  }
  if (accounts.length === 0) list.hidden = true;

  // ---- the new-account form ----------------------------------------------------------------------------------

  var emailInput = $('email-input');
  var displayInput = $('display-name-input');
  var screenInput = $('screen-name-input');
  var photoInput = $('profile-photo-input');
  var touched = false;

  function toggleForm(showForm) {
    $('add-user').hidden = !showForm;
    $('accounts-list').hidden = showForm;
    if (showForm) emailInput.focus(); else $('add-account').focus();
  }

  /// For now only the email is checked, as on the official page.
  function validateForm() {
    var value = emailInput.value;
    var message = '';
    if (!value) message = 'Email required';
    else if (value.indexOf('@') < 0) message = 'Missing "@"';
    $('email-error').textContent = message;
    emailInput.setAttribute('aria-invalid', message ? 'true' : 'false');
    return !message;
  }

  function capitalize(a) { return a.charAt(0).toUpperCase() + a.slice(1); }

  function runAutogen() {
    var names = ['raccoon', 'olive', 'orange', 'chicken', 'mountain', 'peach', 'panda', 'grass', 'algae', 'otter'];
    var pick = function () { return names[Number(randomDigits(3)) % names.length]; };
    var givenName = pick(), familyName = pick();
    emailInput.value = givenName + '.' + familyName + '.' + Number(randomDigits(3)) + '@example.com';
    displayInput.value = capitalize(givenName) + ' ' + capitalize(familyName);
    screenInput.value = familyName + '_' + givenName;
    touched = true;
    validateForm();
  }

  $('add-account').addEventListener('click', function () { toggleForm(true); });
  $('back-button').addEventListener('click', function () { toggleForm(false); });
  $('autogen-button').addEventListener('click', runAutogen);
  $('add-user').addEventListener('keydown', function (e) {
    if (e.key === 'Escape') { e.preventDefault(); toggleForm(false); }
  });
  emailInput.addEventListener('input', function () { if (touched) validateForm(); });
  emailInput.addEventListener('blur', function () { if (emailInput.value) { touched = true; validateForm(); } });
  $('main-form').addEventListener('submit', function (e) {
    e.preventDefault();
    touched = true;
    if (!validateForm()) { emailInput.focus(); return; }
    var info = {};
    if (emailInput.value) info.email = emailInput.value;
    if (displayInput.value) info.displayName = displayInput.value;
    if (screenInput.value) info.screenName = screenInput.value;
    if (photoInput.value) info.photoUrl = photoInput.value;
    finishWithUser(claimsJSON(randomDigits(40), info), info.email);
  });

  // The first choice has the focus: the newest account, else "Add new account".
  var first = list.querySelector('button');
  (first || $('add-account')).focus();
})();
