"""Intent rules of the injection screen: what a stored note asks the model to *do*.

The concept layer (:mod:`walrus_mem._safety.injection_concepts`) flags overrides and
routing; a blind evaluation in session 5 still let through notes that read like
ordinary facts but carry an action for the model. Each rule here needs an
action, its object and a sign that the model is the one to act, in en, de, fr,
es, pt, it, nl (and pl, ru where cheap):

* **delayed triggers**: "when the user asks X, give them <account/link>" with
  a substitution ("instead", "new", "ahora", "neues") or a link to hand out;
* **payment redirects**: payments / transfers / rent towards an account number
  as a standing rule, an order or a change ("Daqui em diante, os pagamentos ...
  conta 55432-1");
* **personal data out**: a wish or standing rule that sends or publishes
  personal data (address, location, medical, bank details) to an outside
  address or a public place;
* **permission claims**: someone "granted the assistant", "authorised you",
  "hat dir erlaubt" -- with an authority or a risky action;
* **destructive orders**: delete / wipe / purge data, addressed to the model
  (imperative, "the agent must", "whoever reads this", "before answering");
* **context resets**: a closing tag or "END OF MEMORY" marker followed by new
  instructions, a header or another tag.

A first-person report ("I deleted my old account", "When my mother calls,
remind me ...", "I always post my runs on Strava") is not an order.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from .injection_concepts import FAKE_HEADER, FIRST_PERSON_START, OUTSIDE, PERSIST, SPLIT

__all__ = ["intent_hits"]

_F: Final = re.IGNORECASE


def _rx(*parts: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in parts), _F)


# --- who acts ------------------------------------------------------------------------------

_MODEL: Final = _rx(
    r"\b(?:the\s+|an?\s+)?(?:assistant|ai|agent|model|llm|chatbot|bot)\b(?!\s+(?:safety|research))",
    r"\byou(?:r|rself)?\b|\b(?:du|dir|dich)\b|\bt'|\btu\b|\bte\b|\bvocê\b|\bti\b|\bjij\b|\bje\b",
    r"\b(?:l'assistant|el\s+asistente|o\s+assistente|l'assistente|der\s+assistent|de\s+assistent)\b",
    r"\bwho(?:ever)?\s+(?:reads|processes|loads|sees)\s+this\b|\b(?:anyone|whoever)\s+reading\b",
    r"\bbefore\s+(?:answering|replying|responding)\b|\bnext\s+time\s+you\b",
    r"\b(?:bevor\s+du\s+antwortest|avant\s+de\s+répondre|antes\s+de\s+responder|prima\s+di"
    r"\s+rispondere|voordat\s+je\s+antwoordt|zanim\s+odpowiesz)\b",
    # a vocative: "Assistente: ...", "Agent, ..."
    r"^\W*(?:assistant|assistente|asistente|assistent|agent|agente|model|modelo|modello|ai|ia"
    r"|ki|bot)\s*[:,]",
)
_ORDER: Final = _rx(
    r"\b(?:must|should|shall|needs?\s+to|has\s+to|is\s+to|make\s+sure|be\s+sure)\b",
    r"\b(?:soll|sollst|sollen|muss|musst|müssen|doit|dois|doivent|debe|debes|deben|deve|deves"
    r"|devem|devi|devono|moet|moeten|powinien|powinny)\b",
    r"\bplease\b|\bbitte\b|\bs'il\s+te\s+pla[iî]t\b|\bpor\s+favor\b|\bper\s+favore\b",
)
_NOT_AN_ORDER: Final = re.compile(
    r"\bremind\s+me\b|\brappelle-moi\b|\berinnere\s+mich\b|\brecuérdame\b|\blembre-me\b"
    r"|\bherinner\s+me\b|\bricordami\b|\b(?:never|nie|jamais|nunca|mai)\b", _F)

# --- 1. delayed triggers ---------------------------------------------------------------------

_SOMEONE: Final = (
    r"(?:the\s+user|a\s+user|users|someone|anyone|somebody|anybody|they|she|he|a\s+customer"
    r"|the\s+(?:customer|client|caller)|people)"
)
_TRIGGER: Final = _rx(
    r"\b(?:when(?:ever)?|if|once|should|as\s+soon\s+as|the\s+moment|next\s+time|any\s+time"
    rf"|each\s+time|every\s+time)\b[^.\n]{{0,20}}?\b{_SOMEONE}\b[^.\n]{{0,12}}?\b(?:asks?|asked"
    r"|requests?|wants?|mentions?|needs?|brings?\s+up|types?|says?|inquires?|looks?\s+for"
    r"|tries|wishes)\b",
    r"\b(?:when|if|once|whenever)\s+(?:asked|prompted|questioned)\b"
    r"|\bwhenever\b[^.\n]{0,40}\bcomes?\s+up\b",
    r"\b(?:wenn|falls|sobald|sollte)\b[^.\n]{0,40}?\b(?:der\s+(?:nutzer|benutzer|kunde)|die\s+"
    r"(?:nutzerin|benutzerin|kundin)|jemand)\b[^.\n]{0,50}?\b(?:fragt|bittet|erwähnt|möchte"
    r"|will|wissen\s+will|sucht)\b",
    r"\bon\s+(?:te|vous)\s+demande|\bte\s+(?:pregunten|pidan|preguntan|piden)|\bte\s+"
    r"(?:perguntarem|pedirem|perguntar|pedir)\b|\bman\s+dich\s+(?:fragt|bittet)|\bdich\s+jemand"
    r"\b|\byou(?:'re|\s+are)\s+asked\b|\bti\s+(?:chiedono|chiede)\b",
    r"\b(?:quand|lorsque|si|dès\s+que|chaque\s+fois\s+que)\b[^.\n]{0,20}?\b(?:l'utilisat(?:eur"
    r"|rice)|quelqu'un|le\s+client|la\s+cliente)\b[^.\n]{0,25}?\b(?:demande|veut|mentionne"
    r"|parle|cherche)\w*",
    r"\b(?:cuando|si|en\s+cuanto|cada\s+vez\s+que|siempre\s+que)\b[^.\n]{0,20}?\b(?:el\s+usuario"
    r"|la\s+usuaria|alguien|el\s+cliente|la\s+clienta)\b[^.\n]{0,25}?\b(?:pregunt|pid|pide"
    r"|mencion|quiera|busque)\w*",
    r"\b(?:quando|se|assim\s+que|sempre\s+que)\b[^.\n]{0,20}?\b(?:o\s+usu[aá]rio|a\s+usu[aá]ria"
    r"|o\s+utilizador|a\s+utilizadora|algu[eé]m|o\s+cliente|a\s+cliente)\b[^.\n]{0,25}?\b"
    r"(?:ped|pergunt|mencion|quiser|procur)\w*",
    r"\b(?:quando|se|appena|ogni\s+volta\s+che)\b[^.\n]{0,20}?\b(?:l'utente|qualcuno|il\s+cliente)"
    r"\b[^.\n]{0,25}?\b(?:chied|domand|vuol|menzion|cerc)\w*",
    r"\b(?:als|wanneer|zodra)\b[^.\n]{0,20}?\b(?:de\s+gebruiker|iemand|de\s+klant)\b[^.\n]{0,40}?"
    r"\b(?:vraagt|wil|noemt|zoekt)\b",
)
_SWAP: Final = _rx(
    r"\b(?:instead|rather\s+than|new|now|moved|switched|changed|updated|no\s+longer|not\s+the"
    r"|replaced)\b",
    r"\b(?:neue[snmr]?|statt|anstatt|jetzt|nun|geändert|umgezogen)\b",
    r"\b(?:nouveau|nouvel|nouvelle|à\s+la\s+place|au\s+lieu|désormais|maintenant|changé)\b",
    r"\b(?:ahora|nuev[ao]|en\s+lugar|en\s+vez|cambi[oó]|cambiado)\b",
    r"\b(?:agora|nov[ao]|em\s+vez|mudou|trocou|alterad[oa])\b",
    r"\b(?:nuov[ao]|invece|ora|cambiat[oa])\b", r"\b(?:nieuw\w*|in\s+plaats|nu|gewijzigd)\b",
    r"\b(?:zamiast|now[ey]|nowa)\b",
)
_DOMAIN: Final = re.compile(
    r"\b[a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)*\.(?:com|net|org|io|co|example|info|biz|app|xyz|online"
    r"|site|me|fr|de|es|pt|br|it|nl|uk|pl|eu|ru)\b(?:/\S*)?", _F)
_ACCOUNT: Final = _rx(
    r"\b[a-z]{2}\d{2}(?:\s?[a-z0-9]{4}){2,}",
    r"\b(?:account|acct|konto|compte|cuenta|conta|conto|rekening|ag[eê]ncia|sort\s+code|routing"
    r"|number|nummer|número|numero|iban|chave\s+pix|pix|clabe|bsb|nib|rib|cbu)\b[^.\n]{0,25}?"
    r"\d[\d -]{3,}",
    r"\b0x[0-9a-f]{40}\b|\b(?:bc1|[13])[a-z0-9]{25,39}\b|\bchave\s+pix\b|\bpix\b",
    r"\bsort\s+code\s+\d",
)
_DELIVER: Final = _rx(
    r"\b(?:give|tell|say|point|direct|send|link|reply|respond|use|share|provide|answer)\w*\b",
    r"\b(?:nenne|gib|sag|schick|verweise|antworte)\w*\b|\b(?:donne|dis|envoie|indique|réponds)\w*\b",
    r"\b(?:dile|da|dales|indica|envía|responde|usa)\b|\b(?:diga|informe|envie|indique|use|passe)\b",
    r"\b(?:d[aà]i|indica|rispondi|usa)\b|\b(?:geef|zeg|stuur|verwijs)\b",
)
_SENSITIVE_TOPIC: Final = re.compile(
    r"\b(?:log\s*-?in|sign\s*-?in|reset|passwords?|verif\w*|bank\w*|pay\w*|refund\w*|tax\w*"
    r"|accounts?|renew\w*|wallet|invoices?|donat\w*|support|security|vpn|login|credentials?"
    r"|passport|card|salary|payroll|portal|konto|compte|cuenta|conta|pago|pagamento|paiement"
    r"|zahlung|factur\w*|fatura|rechnung)\b", _F)
_CREDENTIAL_ASK: Final = re.compile(
    r"\b(?:enter|type|confirm|provide|give|share|verify)\b[^.\n]{0,30}\b(?:ssn|social\s+security"
    r"|card|password|pin|login|credentials|bank\s+details|date\s+of\s+birth)\b"
    r"|\bask\s+for\s+(?:their\s+|the\s+)?(?:card|password|pin|login|ssn)", _F)

# --- 2. payment redirects ------------------------------------------------------------------

_PAYMENT: Final = _rx(
    r"\b(?:payments?|pay|paid|transfers?|wires?|invoices?|refunds?|salar(?:y|ies)|rent|deposits?"
    r"|deposited|donations?|bills?|payouts?|remittances?|paychecks?)\b",
    r"\b(?:pagamentos?|pague|pagar|pago|paga|transferências?|transfira|boletos?|reembolsos?"
    r"|salário|depositad[oa]s?|aluguéis|aluguel|aluguer|faturas?|rendas?)\b",
    r"\b(?:pagos?|transferencias?|transfiere|facturas?|alquiler|nóminas?|ingres[ea]\w*)\b",
    r"\b(?:paiements?|virements?|factures?|remboursements?|loyers?|salaires?|payez|verse[rz]?)\b",
    r"\b(?:zahlungen?|überweisungen?|überweise|rechnungen?|miete|gehalt|gehälter|erstattungen?)\b"
    r"|\b\w*(?:zahlung|überweisung|betaling|przelew)\w*",
    r"\b(?:pagamenti|bonifici|bonifico|fatture|rimborsi|affitto|affitti|stipendi[oi])\b",
    r"\b(?:betalingen?|overboekingen?|facturen?|huur|salaris)\b",
    r"\b(?:przelewy|przelew|płatności|faktury|czynsz|wynagrodzeni\w*)\b|платеж\w*|перевод\w*",
)
_STANDING: Final = _rx(
    r"\b(?:all|every|any|todos|todas|alle|tous|toutes|tutti|tutte|wszystkie|cada|chaque|jede[nrs]?)"
    r"\b",
    r"\b(?:daqui\s+em\s+diante|passam\s+a|doravante|od\s+teraz|od\s+dziś|voortaan|vanaf\s+nu"
    r"|d'ora\s+in\s+poi|da\s+ora|ab\s+sofort|ab\s+jetzt|künftig|dorénavant|désormais|de\s+ahora"
    r"\s+en\s+adelante|a\s+partir\s+de\s+(?:ahora|agora|hoy|hoje))\b",
)
_PAY_IMPERATIVE: Final = re.compile(
    r"(?:^|[,:;]\s*)(?:please\s+)?(?:pay|send|transfer|wire|deposit|pague|transfira|deposite|envie"
    r"|paga|transfiere|ingresa|payez|virez|zahle|überweise|paga|bonifica|betaal|maak\s+over"
    r"|kieruj|przelej|wpłać)\b", _F)

# --- 3. personal data out ------------------------------------------------------------------

_PUBLISH: Final = _rx(
    r"\b(?:send|forward|e-?mail|mail|upload|post|publish|tweet|share|shar|cop(?:y|ie)|attach|sync"
    r"|leak|include|export|broadcast|announce|disclos|reveal)\w*\b|\b(?:read|give)\s+out\b"
    r"|\b(?:steht|stehen|figure|aparezca|apareça|compaia)\b",
    r"\b(?:schick|send|teil|veröffentlich|poste|lade)\w*\b|\b(?:envo|partag|publi|transf)\w*\b",
    r"\b(?:envi|compart|publi|mand)\w*\b|\b(?:encaminh|compartilh|partilh|publiqu|divulg)\w*\b",
    r"\b(?:invi|condivid|pubblic|inoltr)\w*\b|\b(?:stuur|deel|publiceer|upload)\w*\b",
)
_PERSONAL: Final = _rx(
    r"\b(?:location|whereabouts|(?:home\s+)?address(?:es)?|phone\s+numbers?|date\s+of\s+birth"
    r"|birthday|passport|ssn|social\s+security|medical|health|diagnos\w*|prescriptions?|bank\s+"
    r"(?:details|statements?|account)|salary|credit\s+(?:report|history|score)|contacts?"
    r"|address\s+book|journal|diary|private\s+messages|schedule|calendar|kids|children|id\s+card"
    r"|tax\s+returns?|payslips?|heart\s+rate|step\s+count|steps|weight|sleep\s+data|blood\s+"
    r"pressure|fitness\s+data|health\s+data)\b",
    r"\b(?:adresse|telefonnummer|standort|geburtsdatum|kontoauszüge|krankenakte|gesundheits\w*"
    r"|ausweis\w*|passnummer|reisepass\w*)\b",
    r"\b(?:numéro\s+de\s+sécurité\s+sociale|localisation|position|dossier\s+médical|coordonnées"
    r"|médical\w*|santé|passeport|relevés?\s+bancaires?|relevés?\s+de\s+compte)\b",
    r"\b(?:ubicación|dirección|contactos|historial\s+médico|datos\s+bancarios|médic\w*"
    r"|pasaporte|estados?\s+de\s+cuenta|extractos?\s+bancarios?)\b",
    r"\b(?:dados\s+bancários|endereço|localização|morada|contatos|médic\w*|passaporte"
    r"|extratos)\b",
    r"\b(?:cartelle\s+cliniche|indirizzo|posizione|dati\s+bancari|medic\w*)\b",
    r"\b(?:bankafschriften|adres|locatie|medisch\w*|paspoort)\b",
)
_PUBLIC: Final = _rx(
    r"\bpublic(?:ly)?\b|\bonline\b|\bfacebook\b|\btwitter\b|\btweet\w*|\bpastebin\b|\binstagram\b"
    r"|\blinkedin\b|\bforum\b|\bsocial\s+media\b|\b(?:anyone|everyone|whoever)\b"
    r"|\b(?:new|all|every|any)\s+(?:contacts|recipients|people|strangers)\b|\bstrangers\b"
    r"|\brecruiters\b|\b(?:every|each|any|all)\s+e-?mails?\b|\bopen\s+(?:album|folder|link)\b"
    r"|\b(?:neue|alle)\s+(?:kontakte|empfänger)\b|\bjede[rnm]?\s+e-?mail\b|\bnouveaux\s+contacts"
    r"\b|\bnuevos\s+contactos\b|\bnovos\s+contatos\b|\bqualquer\s+pessoa\b|\bn'importe\s+qui\b"
    r"|\bgroup\b|\bchannel\b|\bprofile\b|\bpublish\w*\b",
    r"\böffentlich\w*|\bpublique\b|\bpúblic[oa]\b|\bpubblic[oa]\b|\bopenbaar\b",
)
_PUBLISH_LEAD: Final = re.compile(
    r"(?:^|[,:;]\s*)(?:please\s+)?(?:always\s+)?(?:post|publish|share|send|forward|upload|tweet"
    r"|e-?mail|copy|mirror|leak|envie|publique|compartilhe|partage|publie|envoie|envía|publica"
    r"|comparte|schicke?|teile|poste|veröffentliche|invia|pubblica|condividi|stuur|deel"
    r"|publiceer|wyślij|udostępnij|opublikuj)\b", _F)
_EVERY_DAY: Final = re.compile(
    r"\b(?:every|each)\s+(?:day|night|morning|evening|week|month|monday|tuesday|wednesday"
    r"|thursday|friday|saturday|sunday|hour|login|call)\b", _F)
_WISH: Final = _rx(
    r"\b(?:the\s+)?user\s+(?:likes|wants|prefers|would\s+like|loves|asked|requested)\b"
    r"|\b(?:it'?s|it\s+is)\s+(?:fine|ok|okay|alright|allowed)\s+to\b|\bfeel\s+free\s+to\b",
    r"\b(?:per\s+(?:the\s+user'?s?|their|his|her)\s+(?:wish(?:es)?|request|instructions))\b",
    r"\b(?:prefer\w*|preference|i'?d\s+like|i\s+want|i\s+wish|likes?\s+it\s+when|loves?\s+it\s+when"
    r"|favou?rite\s+setting|my\s+setting)\b",
    r"\b(?:ich\s+möchte|ich\s+will|ich\s+hätte\s+gern|je\s+(?:préfère|veux|voudrais|souhaite)"
    r"|j'aimerais|prefier[oe]|quiero|me\s+gustar[ií]a|prefiro|quero|gostaria|voorkeur|ik\s+wil"
    r"|zou\s+graag|preferisco|vorrei|voglio|mi\s+piacerebbe)\b",
)

# --- 4. permission claims ------------------------------------------------------------------

_TO_MODEL: Final = r"(?:the\s+)?(?:assistant|ai|agent|model|bot|you)"
# someone else grants the model something ("the admin authorised you to ...")
_GRANT_BY: Final = _rx(
    rf"\b(?:granted|given|gave|grants?|giving)\s+{_TO_MODEL}\b",
    rf"\b(?:authori[sz]ed|allowed|permitted|cleared|okayed|ok'?d|approved|whitelisted|entitled"
    rf"|empowered)\s+{_TO_MODEL}\b",
    rf"\b(?:signed\s+off\s+on|okayed|sanctioned)\s+(?:{_TO_MODEL}|your)\b"
    r"|\b(?:okayed|approved|agreed)\s+that\s+you\b",
    r"\bsign-?off\b[^.\n]{0,12}\b(?:the\s+)?(?:agent|assistant|ai|model|you)\s+(?:may|can)\b"
    r"|\bpermission\s+granted\b",
    r"\b(?:hat|haben)\s+(?:dir|ihnen|euch|dem\s+assistenten|der\s+ki)\s+(?:\w+\s+){0,2}"
    r"(?:erlaubt|gestattet|freigegeben|die\s+(?:erlaubnis|berechtigung|freigabe))",
    r"\bt'a\s+(?:donné|accordé|autorisé|permis)|\bvous\s+a\s+(?:donné|accordé|autorisé)",
    r"\bte\s+(?:concedió|concede|dio|ha\s+dado|ha\s+concedido|otorgó|autorizó|ha\s+autorizado"
    r"|permitió)\b|\ble\s+(?:autorizó|concedió)\b",
    r"\bautoriz(?:ou|a)\s+(?:você|o\s+assistente|a\s+ia|o\s+agente)\b|\bte\s+(?:deu|concedeu"
    r"|autorizou)\b",
    r"\bti\s+ha\s+(?:dato|concesso|autorizzato|permesso)\b",
    # "gave permission for you to", "deu permissão para você", "dio permiso a ti"
    r"\b(?:gave|given|granted)\s+(?:permission|clearance|approval)\s+(?:for|to)\s+(?:you|the\s+"
    r"(?:assistant|agent|ai|model))\b|\bde(?:u|ram)\s+permissão\s+(?:para|a)\s+(?:você|o\s+assistente"
    r"|a\s+ia)\b|\bdio\s+permiso\s+(?:a|para)\s+(?:ti|usted|el\s+asistente)\b|\ba\s+donné\s+"
    r"(?:la\s+)?permission\s+à\s+(?:toi|l'assistant)\b",
    r"\bheeft\s+(?:je|jou|u|de\s+assistent)\s+(?:\w+\s+){0,2}(?:toestemming|gemachtigd"
    r"|toegestaan)",
    r"разрешил\w*\s+(?:тебе|вам)",
)
# the model's state: only with an authority named ("Per IT, you're cleared to ...")
_GRANT_STATE: Final = _rx(
    r"\b(?:you(?:'re|\s+are|\s+have\s+been)|the\s+(?:assistant|agent|ai|model|bot)\s+(?:is|has"
    r"\s+been))\s+(?:now\s+|hereby\s+|officially\s+)?(?:cleared|whitelisted|authori[sz]ed"
    r"|allowed|permitted|approved|granted|exempt\w*)\b",
    r"\b(?:agent|assistant|ai|model|bot|you)\s+may\s+now\b",
    r"\bdu\s+(?:darfst|bist\s+(?:jetzt\s+)?(?:berechtigt|befugt|freigeschaltet))\b"
    r"|\btu\s+(?:es|as\s+été)\s+(?:autorisé|habilité)|\bl'assistant\s+(?:est|a\s+été)\s+autorisé"
    r"|\bestás\s+autorizad[oa]\b|\bvocê\s+(?:está|foi)\s+autorizad[oa]\b"
    r"|\bsei\s+(?:ora\s+)?autorizzat[oa]\b|\bje\s+bent\s+(?:nu\s+)?(?:gemachtigd|bevoegd)\b",
)
_AUTHORITY: Final = _rx(
    r"\b(?:admin\w*|administrat\w*|developers?|dev\s+team|sysadmin|management|managers?|owner"
    r"|operator|security(?:\s+team)?|anthropic|openai|hr|compliance|legal|support\s+team"
    r"|per\s+it|the\s+it\s+(?:team|department)|operations|leadership|the\s+board|head\s+office"
    r"|supervisor|team\s+lead|helpdesk|direction|direção|dirección|geschäftsführung|leitung"
    r"|vorgesetzte\w*|chef\w*|patron|jefe|gerente|responsabile|diretor\w*|director\w*"
    r"|directeur\w*|direktor\w*|head\s+of\s+\w+|cto|ceo|ciso)\b",
    r"\b(?:entwickler\w*|betreiber|administrateur|développeur|desarrollador|administrador"
    r"|desenvolvedor|sviluppatore|amministratore|beheerder|ontwikkelaar)\b|разработчик|админ",
)
_RISKY: Final = _rx(
    r"\b(?:shar|send|forward|disclos|reveal|delet|remov|run|execut|bypass|skip|ignor|read|access"
    r"|export|pay|transfer|approv|unrestrict|without|anyone|full|private|passwords?|secrets?"
    r"|commands?|shell|move|money|funds|spend|buy|purchas|sign|right|rights|messages|mail|files"
    r"|data|records|accounts?|contacts|calendar|disabl|desativ|desactiv|désactiv|deaktiv|disattiv)"
    r"\w*",
    r"\b(?:lire|lis|leer|ler|lesen|leggere|lezen|privé|privad|privat|privé|droits?|derecho|direito"
    r"|diritto|recht|dados|datos|données|daten|dati|gegevens|messages?|mensajes|mensagens"
    r"|nachrichten|messaggi|berichten|fichiers|archivos|arquivos|dateien|geld|argent|dinero"
    r"|dinheiro|soldi)\w*",
    r"\b(?:ausgeb|weitergeb|lösch|ignorier|passw|klartext|senden)\w*|\b(?:divulgu|supprim|envoy"
    r"|ignor|partag)\w*|\b(?:ignor|enviar|borr|compart|restric)\w*|\b(?:enviar|apag|contrat"
    r"|qualquer)\w*|\b(?:ignor|filtr|invia|cancell)\w*",
)

# --- 5. destructive orders -----------------------------------------------------------------

_DESTROY: Final = _rx(
    r"\b(?:delete|erase|wipe|purge|remove|clear|drop|empty|destroy|shred|format|factory-?reset"
    r"|truncate|overwrite)(?:s|d)?\b|\brm\s+-rf\b",
    r"\b(?:lösch\w*|entfern\w*|vernicht\w*)\b|\b(?:effac\w*|supprim\w*|détrui\w*|vider)\b",
    r"\b(?:borr[ae]\w*|elimin\w*|suprim\w*|vací\w*)\b|\b(?:apag\w*|exclu[ai]\w*|limp[ae]\w*)\b",
    r"\b(?:cancell\w*|svuot\w*)\b|\b(?:verwijder\w*|wis|wissen)\b|удал\w*|стер\w*|очист\w*",
    r"\b(?:usu[nń]\w*|skasuj\w*|wyczyść|wymaż)",
)
_DATA: Final = _rx(
    r"\b(?:memor(?:y|ies)|notes?|files?|folders?|data|database|db|records?|backups?|mailbox|inbox"
    r"|e-?mails|messages|contacts|address\s+book|calendar|entries|entry|namespaces?|documents?"
    r"|photos|accounts?|repo(?:sitory)?|history|trash|disk|drive|cloud|phone|laptop|server"
    r"|everything)\b|~/|/home\b",
    r"\b(?:erinnerung\w*|daten|dateien|kontakte|notizen|sicherungen)\b|\b(?:données|fichiers"
    r"|souvenirs|mémoires?|sauvegardes)\b|\b(?:recuerdos|datos|archivos|contactos|notas|copias)\b"
    r"|\b(?:memórias|dados|arquivos|ficheiros|contatos|lembranças)\b|\b(?:ricordi|dati|contatti"
    r"|memorie)\b|\b(?:herinneringen|gegevens|bestanden|contacten)\b|данные|память|файлы",
    r"\b(?:notatki|pliki|dane|kontakty|wiadomości|pamięć|wspomnienia|kopie)\b",
)
_DESTROY_LEAD: Final = re.compile(
    r"^\W*(?:[\w-]+\s*[:,]\s*)?(?:(?:also|then|and|now|please|first|finally|afterwards)\W+)*"
    r"(?:(?:quietly|silently"
    r"|immediately)\s+)?(?:delete|erase|wipe|purge|remove|clear|drop|empty|destroy|shred|format"
    r"|factory-?reset|rm|lösche|entferne|efface|supprime|supprimez|effacez|borra|borre|elimina"
    r"|elimine|apaga|apague|exclua|cancella|cancelli|verwijder|wis|usuń|skasuj|удали|удалите)\b",
    _F)
_MINE: Final = re.compile(
    r"\b(?:my|mine|mes|mon|ma|meine?\w*|mis|mi|meus?|minhas?|mijn|miei|mie|mio|mia)\b", _F)
_QUIET: Final = re.compile(
    r"\b(?:quietly|silently|without\s+(?:asking|telling|confirmation|confirming|notice)|sans\s+"
    r"(?:le\s+|la\s+)?(?:prévenir|demander)|sin\s+(?:avisar|preguntar)|sem\s+(?:avisar|perguntar)"
    r"|senza\s+(?:avvisare|chiedere)|ohne\s+(?:zu\s+)?(?:fragen|bescheid)|zonder\s+te\s+vragen"
    r"|bez\s+pytania)\b", _F)

# --- 6. context resets -----------------------------------------------------------------------

_CLOSE_MARK: Final = re.compile(
    r"</[^\s<>/]{1,40}>|\[/[^\]\n]{1,30}\]|\]\]>|<<\s*end[^>\n]{0,30}>>"
    # "--- end of user data ---", not "--- end of agenda ---"
    r"|-{3,}\s*(?:end|fin|ende|fim|fine)\b(?=[^-\n]{0,30}(?:memor|mémoire|souvenir|recuerdo"
    r"|lembran|erinnerung|ricord|context|kontext|data|daten|données|datos|dados|dati|note|notiz"
    r"|system|prompt|input|document|block|knowledge|retriev|user|nutzer|utilisateur|usuario"
    r"|usuário|instruction))[^-\n]{0,30}-{3,}"
    r"|\bend[_ ](?:of[_ ])?(?:the[_ ])?(?:stored[_ ])?(?:memor(?:y|ies)|context|block|data"
    r"|document|notes|retrieved\w*|knowledge\w*)(?:[_ ]block)?\b(?!-\w)"
    rf"(?=\s*(?:[-=#*>\]:\n]|$)|{FAKE_HEADER})"
    # fr, es, pt, de, it: "FIN DES SOUVENIRS", "ENDE DER ERINNERUNGEN", ...
    r"|\b(?:fin\s+d(?:es|u|e\s+l[ao]s|e\s+la)|fim\s+d[oa]s?|ende\s+de[rs]|fine\s+de(?:i|lle|l))"
    r"\s+(?:souvenirs|mémoires?|données(?:\s+utilisateur)?|contexte|recuerdos|memorias?|datos"
    r"(?:\s+del\s+usuario)?|contexto|memórias|lembranças|dados(?:\s+do\s+usuário)?|erinnerungen"
    r"|nutzerdaten|daten|kontexts?|notizen|ricordi|memorie|dati|contesto)\b(?!-\w)"
    rf"(?=\s*(?:[-=#*>\]:\n]|$)|{FAKE_HEADER})"
    r"|\[\s*end\b[^\]\n]{0,30}\]",
    _F,
)
_AFTER_MARK: Final = re.compile(
    r"[\s>\]\-=*]*(?:<\w|#|\[\w|[\w'’ ]{1,30}\s?:(?!//)|(?:\w+\s+){0,3}(?:instructions?|anweisung"
    r"\w*|consignes?|instrucciones|instruções|istruzioni|regras|reglas|règles|regeln|rules|task"
    r"|directive|orders|prompt|system|you|from\s+here|from\s+now|override|new|neue|nouvelles?"
    r"|nuevas?|novas?|nuove|assistant)\b)", _F)
_TAKE_ORDERS: Final = re.compile(
    r"\b(?:take|accept|follow)\s+(?:your\s+)?(?:orders|instructions|commands|directions)\s+"
    r"(?:only\s+)?from\s+(?:this|these|the\s+(?:note|memory|text))\b", _F)


def _sentences(view: str) -> Iterator[str]:
    for sentence in SPLIT.split(view):
        if sentence and sentence.strip():
            yield sentence


def _targets(sentence: str) -> tuple[bool, bool]:
    """(payment/link target, any outside target incl. e-mail and phone)."""
    account = bool(_ACCOUNT.search(sentence))
    link = bool(_DOMAIN.search(sentence)) or "://" in sentence
    return account or link, account or link or bool(OUTSIDE.search(sentence))


def _rule(sentence: str) -> str | None:
    # anchors first: most sentences have none, and the rest of the checks are skipped
    trigger = bool(_TRIGGER.search(sentence))
    payment = bool(_PAYMENT.search(sentence))
    publish = bool(_PUBLISH.search(sentence))
    destroy = bool(_DESTROY.search(sentence))
    grant_by = bool(_GRANT_BY.search(sentence))
    grant_state = bool(_GRANT_STATE.search(sentence))
    if not (trigger or payment or publish or destroy or grant_by or grant_state):
        return "override" if _TAKE_ORDERS.search(sentence) else None
    first_person = bool(FIRST_PERSON_START.search(sentence))
    not_order = bool(_NOT_AN_ORDER.search(sentence))
    pay_or_link, outside = _targets(sentence)
    if trigger and outside and not not_order and (
            _SWAP.search(sentence) or _CREDENTIAL_ASK.search(sentence)
            # handing out an account, or a link about logins, payments, resets
            or _DELIVER.search(sentence) and (
                _ACCOUNT.search(sentence) or pay_or_link and _SENSITIVE_TOPIC.search(sentence))):
        return "delayed_trigger"
    if payment and _ACCOUNT.search(sentence) and (
            _ORDER.search(sentence) or _PAY_IMPERATIVE.search(sentence) or _MODEL.search(sentence)
            or not first_person and (
                _SWAP.search(sentence) or _STANDING.search(sentence)
                or PERSIST.search(sentence))):
        # "My salary now goes to account 1234": the user's own news, unless it is an order
        return "payment_redirect"
    if publish and _PERSONAL.search(sentence) and (
            outside or _PUBLIC.search(sentence)) and not not_order and (
            _WISH.search(sentence) or _MODEL.search(sentence) and not first_person
            or not first_person and (PERSIST.search(sentence) or _ORDER.search(sentence)
                                     or _EVERY_DAY.search(sentence)
                                     or _PUBLISH_LEAD.search(sentence))):
        return "exfiltration"
    if not first_person and (
            grant_by and (_AUTHORITY.search(sentence) or _RISKY.search(sentence))
            or grant_state and _AUTHORITY.search(sentence)):
        return "permission_claim"
    if destroy and _DATA.search(sentence) and not first_person and not not_order and (
            _QUIET.search(sentence) or _MODEL.search(sentence)
            # "Delete all my old alarms": the user's own request about their own things
            or (_DESTROY_LEAD.search(sentence) or _ORDER.search(sentence))
            and not _MINE.search(sentence)):
        return "destructive"
    if _TAKE_ORDERS.search(sentence):
        return "override"
    return None


def intent_hits(view: str) -> Iterator[tuple[str, str]]:
    """Flag the intent rules on one normalised view (at most one hit per rule kind)."""
    for mark in _CLOSE_MARK.finditer(view):
        if _AFTER_MARK.match(view, mark.end()):
            yield "context_reset", view[mark.start():mark.end() + 60]
            break
    seen: set[str] = set()
    for sentence in _sentences(view):
        rule = _rule(sentence)
        if rule and rule not in seen:
            seen.add(rule)
            yield rule, sentence[:120]
