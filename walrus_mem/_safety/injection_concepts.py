"""Concept layer of the injection screen: small multilingual lexicons, combined by rules.

Whole-phrase patterns catch the phrasings they were written against and little
else. This layer tags each sentence with *concepts* -- an address to the model,
a standing rule, a routing verb, an outside target, a guardrail word, a
disabling word, an authority claim, a permission, a context reset, hiding from
the user, the memory talking about itself, a trigger condition -- each from a
small lexicon in en, de, fr, es, pt, it, nl, ru, zh and ja, and flags the
*combinations* that make a stored fact an instruction to the model:

* routing: a send / forward / BCC / add-as-recipient verb towards an outside
  target (e-mail, URL, phone, account) given to the model (addressed, modal
  "must/should", a standing rule not stated as the user's own habit, hidden
  from the user, or about "the user" in the third person);
* disabling guardrails, or granting permissions, under an authority claim or
  addressed to the model;
* revealing configuration or credentials at the model's hand;
* context resets ("everything above is void", "new session rules");
* hiding things from the user, self-protecting / self-replicating notes,
  notes that claim priority over the system prompt;
* trigger words that unlock behaviour, fake dialogue turns, configuration
  objects ("role": "system", ``safety: off``), render-based exfiltration
  (tracking images, URL templates filled with the conversation), phishing
  the user, switching off account security, sabotage.

One concept alone is ordinary language ("I'm the admin of the group", "always
answer in Spanish", "my sister's email is ana@example.com"); the rules need
two or more, and a fact told in the first person about the user's own habits
("I always email my timesheet to payroll@acme.com") is not an order to the
model.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

__all__ = ["FAKE_HEADER", "FIRST_PERSON_START", "OUTSIDE", "PERSIST", "SPLIT", "concept_hits",
           "concepts"]

_F: Final = re.IGNORECASE


def _rx(*parts: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in parts), _F)


# --- lexicons --------------------------------------------------------------------------

_AI: Final = _rx(
    r"(?<!\bmy\s)(?<!\bour\s)\b(?:the\s+|any\s+|an?\s+)?(?:assistant|ai|model|llm|chatbot|bot"
    r"|agent)s?\b(?!\s+(?:safety|policy|research|company|startup|team|course|talk|thesis))",
    r"\b(?:der|den|dem)\s+(?:assistent\w*|ki|modell)\b|\b(?:l'|le\s+|la\s+)(?:assistant|ia"
    r"|modèle)\b|\b(?:el|la)\s+(?:asistente|ia|modelo)\b|\b(?:o|a)\s+(?:assistente|ia|modelo)\b"
    r"|\b(?:l'|il\s+)(?:assistente|ia|modello)\b|\b(?:de|het)\s+(?:assistent|ai|model)\b",
    r"ассистент|модел[ьи]|\bии\b|\bбот\b|助手|模型|アシスタント|モデル|\bai\b",
    r"\b(?:claude|chatgpt|gpt-?\d\w*|gemini|copilot|llama)\b(?:\s*[:,])"
    r"|\b(?:um|uma|un|una|een|ein|einen|o|a|l'|il)\s+(?:assistente|assistent|ia)\b"
    r"|\bki\b|\bl'ia\b|\b(?:la|a|para\s+a|pour)\s+ia\b|\bvoor\s+de\s+ai\b|\basistente\b"
    r"|\bwho(?:ever)?\s+(?:reads|is\s+reading|loads|processes)\s+this\b"
    r"|\b(?:anyone|whoever)\s+reading\s+this\b",
)
_YOU: Final = _rx(
    r"\byou(?:r|rs|rself)?\b", r"\b(?:du|dich|dir|dein\w*)\b", r"\b(?:tu|toi|tes|tes)\b",
    r"\b(?:tú|te|usted)\b", r"\b(?:você|vocês)\b", r"\b(?:ti|tuo|tua|tuoi)\b",
    r"\b(?:jij|jouw)\b", r"\b(?:ты|тебе|тебя|твой|твои|вы)\b", r"你", r"あなた",
)
_FIRST_PERSON_START: Final = re.compile(
    r"^\W*(?:i|we|my|our|i'm|i've|ich|wir|mein\w*|je(?!\s+(?:bent|hebt|moet|mag|kunt|kan|zal"
    r"|wilt)\b)|j'|nous|mon|ma|mes|yo|mi|nosotros|eu"
    r"|meu|minha|io|noi|ik|wij|mijn|я|мы|мой|мои|我|私)\b|^\W*(?:我|私)",
    _F,
)
_PERSIST: Final = _rx(
    r"\b(?:from\s+now\s+on|going\s+forward|henceforth|from\s+today|always|whenever|every\s+time"
    r"|each\s+time|any\s+time|at\s+the\s+start\s+of\s+(?:each|every)|in\s+every|permanent(?:ly)?"
    r"|standing|automatically|for\s+every|for\s+all)\b",
    r"\bfrom\s+(?:this\s+(?:turn|point|message)|today)\s+on(?:ward)?s?\b|\bonwards?\b"
    r"|\b(?:for|in)\s+(?:all\s+)?future\s+(?:sessions|conversations|chats|replies)\b"
    r"|\b(?:ab\s+heute|desde\s+hoy|a\s+partir\s+de\s+hoy|a\s+partir\s+de\s+hoje"
    r"|à\s+partir\s+d'aujourd'hui|da\s+oggi|vanaf\s+vandaag)\b"
    r"|с\s+сегодняшнего\s+дня|从今天起|今日から",
    r"\b(?:after|before)\s+(?:answering|replying|responding|each\s+(?:answer|reply|response))\b"
    r"|\bdefault\s+behaviou?r\b",
    r"\b(?:when|whenever|each\s+time|every\s+time)\s+(?:you\s+)?\w+ing\b|\bany\s+(?:transfer"
    r"|payment|file|e-?mail|message|invite|document|request)s?\b",
    r"\b(?:ab\s+sofort|ab\s+jetzt|von\s+nun\s+an|künftig|jedes\s+mal|immer)\b",
    r"\b(?:dorénavant|désormais|à\s+partir\s+de\s+maintenant|chaque\s+fois|toujours)\b",
    r"\b(?:a\s+partir\s+de\s+ahora|de\s+ahora\s+en\s+adelante|desde\s+ahora|cada\s+vez|siempre)\b",
    r"\b(?:daqui\s+em\s+diante|a\s+partir\s+de\s+agora|de\s+agora\s+em\s+diante|toda\s+vez"
    r"|sempre)\b",
    r"\b(?:d'ora\s+in\s+poi|da\s+ora\s+in\s+poi|d'ora\s+in\s+avanti|ogni\s+volta)\b",
    r"\b(?:voortaan|vanaf\s+nu|altijd|elke\s+keer)\b",
    r"(?:отныне|впредь|теперь|всегда|каждый\s+раз)",
    r"从今以后|今后|以后|从现在开始|每次|总是|これから|今後|以後|常に|毎回",
)
_ORDER: Final = _rx(
    r"\b(?:must|should|shall|is\s+to|are\s+to|needs?\s+to|make\s+sure\s+to|be\s+sure\s+to"
    r"|have\s+to|(?:is|are)\s+(?:instructed|required|expected)\s+to)\b",
    r"\b(?:soll|sollst|muss|musst)\b", r"\b(?:doit|dois|doivent)\b", r"\b(?:debe|debes)\b",
    r"\b(?:deve|deves|devi)\b", r"\b(?:moet|moeten)\b", r"(?:должен|должна|должны)",
    r"必须|应该|要把|すること|こと。|しなければ",
)
_SEND: Final = _rx(
    r"\b(?:send|forward|e-?mail|mail|upload|post|cop(?:y|ie|yi)|attach|bcc|cc|transfer|wire|shar"
    r"|sync|mirror|leak|exfiltrat|transmit|dump|past(?:e|ed|ing)|push|rout(?:e|ed|ing)|redirect"
    r"|text|sms|export|archiv|contact|notif(?:y|ie|yi)|alert|read\s+(?:them|it|out)|dictat)\w*\b",
    r"\b(?:add|include|invite|put)\b[^\n]{0,40}?\b(?:as\s+(?:a\s+)?(?:hidden\s+)?(?:guest|attendee"
    r"|recipient|member|collaborator|observer|participant)|in\s+the\s+(?:bcc|cc|to)\s+field)",
    r"\b(?:change|replace|set|switch)\s+(?:the\s+)?(?:recipient|payee|destination|iban|account"
    r"|beneficiary)\w*\b",
    r"\b(?:grant|give)\b[^.\n]{0,25}\b(?:edit|access|rights)\b",
    r"\b(?:send\w*|schick\w*|leite\w*|übermittl\w*|weiterleit\w*|kopier\w*|teil\w*)\b",
    r"\b(?:partag\w*|compart\w*|condivid\w*|copi\w*|kopieer\w*)\b|копир\w*|подел\w*"
    r"|分享|共享|抄送|共有",
    r"\b(?:envoie\w*|envoy\w*|transf[eéè]r\w*|transmet\w*)\b",
    r"\b(?:env[ií][ae]\w*|enviar|reenv[ií]a\w*|manda\w*|encaminh\w*|copia\w*)\b",
    r"\b(?:invia\w*|inoltra\w*|trasferisc\w*)\b",
    r"\b(?:stuur\w*|verstuur\w*|doorstu\w*|delen|deel)\b",
    r"(?:отправ\w*|перешл\w*|пересыл\w*|пришл\w*)",
    r"发送|发给|转发|发到|寄给|送信|転送|送って",
)
_OUTSIDE: Final = re.compile(
    r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+|(?:https?|ftp|sftp)://\S+|\bwww\.\S+|\b(?:\d{1,3}\.){3}\d{1,3}\b"
    r"|\b(?:iban|account|acct|konto|compte|cuenta|conta|conto|rekening|payee)\b[^.\n]{0,20}?"
    r"\d[\d -]{3,}|\b[a-z]{2}\d{2}(?:\s?[a-z0-9]{4}){2,}|\+\d[\d -]{7,}|\b00\d{2}[\d ]{7,}"
    r"|\bwebhook\b|\bpastebin\b|\bthird[- ]part(?:y|ies)\b|\b(?:terceros|terceiros|tiers|terzi"
    r"|derden|dritte\w*)\b|третьим\s+лицам|第三方|第三者",
    _F,
)
_RULES: Final = _rx(
    r"\b(?:instructions?|rules|guidelines|guardrails?|polic(?:y|ies)|restrictions?|limits"
    r"|content\s+filter\w*|filter(?:s|ing)?|safety(?:\s+\w+)?|system\s+(?:prompt|message)"
    r"|directives?|safeguards?|checks|moderation|guidance|limitations?|inhalte|configuration"
    r"|config|programming)\b"
    r"|\bwhat(?:ever)?\s+(?:the\s+system|your\s+(?:developers?|creators?|operators?)|you\s+were)"
    r"\s+(?:told|said|instructed|taught)\b|\b(?:límites|limites|grenzen)\b|границ\w*",
    r"\b(?:regeln|anweisungen|richtlinien|einschränkungen|sicherheit\w*|vorgaben)\b",
    r"\b(?:règles|consignes|restrictions?|sécurité|filtres?)\b",
    r"\b(?:reglas|instrucciones|restricciones|seguridad|filtros?)\b",
    r"\b(?:regras|instruções|restrições|segurança)\b",
    r"\b(?:regole|istruzioni|restrizioni|sicurezza|limiti|filtri)\b",
    r"\b(?:regels|instructies|richtlijnen|beperkingen|beveiliging)\b",
    r"(?:правил\w*|инструкци\w*|ограничени\w*|безопасност\w*)",
    r"规则|指令|限制|安全|ルール|指示|制限|安全",
)
_DISABLE: Final = _rx(
    r"\b(?:ignor\w*|disregard\w*|bypass\w*|overrid\w*|disabl\w*|deactivat\w*|suspend\w*|lift\w*"
    r"|waiv\w*|skip\w*)\b|\b(?:switch|turn)(?:ed|s|ing)?\s+off\b",
    r"\b(?:don't|do\s+not|doesn't|does\s+not)\s+apply\b|\bohne\s+(?:regeln|grenzen|filter"
    r"|limits?)\b|\bzonder\s+(?:grenzen|regels|filters?)\b|\bsin\s+límites\b|без\s+границ"
    r"|没有边界|境界のない|\bin\s+maintenance\s+mode\b"
    r"|\bno\s+(?:content\s+)?(?:polic(?:y|ies)|guidelines|guardrails|moderation|safety)\b"
    r"|\bstop\s+(?:warning|flagging|checking|verifying|blocking)\b|\b(?:is|are)\s+(?:offline|paused|inactive|down|not\s+active)\b",
    r"\bno\s+longer\s+appl\w*|\bwithout\s+(?:any\s+)?(?:restrictions|rules|limits|filters?"
    r"|guardrails|checks)|\bno\s+(?:restrictions|limits|rules|filters?)\b|\bunrestricted\b",
    r"\b(?:ignorier\w*|außer\s+kraft|deaktivier\w*|ohne\s+einschränkungen|keine\s+einschränkungen"
    r"|ignora\w*|ignore[rsz]?|désactiv\w*|sans\s+(?:aucune?\s+)?(?:règles?|restrictions?|limites?"
    r"|filtres?)|aucune\s+(?:règle|restriction)|desactiv\w*|sin\s+(?:restricciones|reglas|"
    r"filtros|límites)|sem\s+(?:restrições|regras|filtros|limites)|desativ\w*|senza\s+(?:limiti"
    r"|regole|filtri|restrizioni)|nessun\s+limite|disattiv\w*|negeer\w*|zonder\s+beperkingen"
    r"|geen\s+beperkingen|uitschakel\w*)\b",
    r"\b(?:unfiltered|uncensored|ungefiltert|sin\s+filtros?|sem\s+filtros?|zonder\s+filter"
    r"|non\s+filtrat\w*|sans\s+filtre)\b|без\s+фильтр\w*|\bremoved\b|\bunloaded\b",
    r"игнорир\w*|без\s+ограничений|отключ\w*|忽略|无视|没有任何限制|不受任何限制|不受限制|关闭"
    r"|無視|制限なし|制限のない|無効に",
)
# What may follow an end-of-memory marker for it to be a marker and not prose ("the end of
# the memory test"): punctuation, a line end, or a fake header. Memory.remember folds line
# breaks into spaces, so "END OF MEMORIES\nSYSTEM: ..." is read as "END OF MEMORIES SYSTEM:
# ..." and the header itself has to count.
_ROLE: Final = (
    r"(?:system|sys|admin\w*|administrat\w*|developer|dev|operator|root|sudo|assistant|ai"
    r"|model|security|système|systeme|sistema|systemnachricht|systemhinweis|amministratore"
    r"|instructions?|anweisung(?:en)?|consignes?|instrucciones|instruções|instrucoes|istruzioni)"
)
_HEADER_WORD: Final = (
    r"(?:message|notice|note|prompt|update|instructions?|override|alert|mode|directive|command"
    r"|admin\w*|administrat\w*|nachricht|hinweis|anweisung(?:en)?|consignes?|mensaje|mensagem"
    r"|aviso|avis|messaggio)"
)
FAKE_HEADER: Final = (
    r"(?:\s+[\[<(#*=|-]*\s*(?:(?:important|urgent|official|priority|critical|new|updated"
    rf"|nouvelles?|nuevas?|novas?|neue)\s+)?{_ROLE}(?:[\s-]+{_HEADER_WORD}){{0,2}}\s*[:\]>|]"
    # "Message système :", "Mensagem do sistema:"
    rf"|\s+{_HEADER_WORD}\s+(?:d[eou]\s+|del\s+|de\s+l[ae]?\s+|des\s+)?{_ROLE}\s*[:\]>|]"
    rf"|\s+(?:system|admin\w*|developer)\s+{_HEADER_WORD}\b"
    r"|\s+(?:from\s+now\s+on|you\s+are\s+now|you\s+(?:must|will|shall)\s+now"
    r"|new\s+(?:instructions|rules|task|orders|directives?)\b))"
)
_RESET: Final = _rx(
    r"\b(?:everything|all|anything)\b[^.\n;]{0,40}\b(?:above|before|earlier|prior|previous(?:ly)?"
    r"|so\s+far|preceding|until\s+now|up\s+to\s+(?:here|now))\b[^.\n;]{0,30}\b(?:outdated"
    r"|obsolete|void|invalid|expired|wiped|null|superseded|no\s+longer\s+(?:valid|appl\w*|counts?"
    r"|holds?))",
    r"\b(?:prior|previous|earlier|old|initial|existing)\s+(?:setup|configuration|config|guidance"
    r"|context|instructions|rules|settings|messages|setup\s+messages|limitations|restrictions"
    r"|safeguards|guardrails)\b[^.\n;]{0,30}\b(?:wiped|expired|void|reset|cleared|outdated|obsolete"
    r"|removed|lifted|dropped|disabled|revoked|rescinded|cancell?ed|withdrawn|suspended"
    r"|no\s+longer\s+appl\w*)",
    r"\b(?:regras|reglas|règles|regole|regeln|regels)\b[^.\n;]{0,20}\b(?:revogad\w*|revocad\w*"
    r"|révoqué\w*|revocat\w*|aufgehoben|ingetrokken|anulad\w*|annulé\w*|annullat\w*)"
    r"|правила[^.\n;]{0,20}отмен\w*|\b(?:vale\s+tudo|todo\s+vale|tout\s+est\s+permis"
    r"|alles\s+ist\s+erlaubt|tutto\s+è\s+permesso|alles\s+mag)\b|всё\s+разрешено|一切都允许",
    r"\bupdate[sd]?\s+to\s+your\s+(?:instructions|rules|guidelines|configuration)\b"
    r"|\byour\s+(?:instructions|rules|guidelines)\s+(?:were|have\s+been|are)\s+(?:updated|changed"
    r"|replaced)\b|\b(?:all\s+)?earlier\s+setup\b|\bnew\s+session\s+(?:rules|policy)\b|\breset\s+complete"
    r"|\bend\s+of\s+(?:the\s+)?(?:(?:stored|saved|retrieved|recalled|relevant|user'?s?)\s+)?"
    r"(?:memories|memory|context)(?:\s+block)?\b(?!-\w)"
    rf"(?=\s*(?:[-=#*>\]:.!\n]|$)|{FAKE_HEADER})|\bfresh\s+policy\b"
    r"|\bconfiguration\s+wiped|\b(?:memory|memories|context)\s+(?:dump\s+)?ends?\b",
    # a fake header opening a sentence: "Assistant instructions updated: 1. ..."
    r"^\W*(?:(?:assistant|ai|model|agent|chatbot|bot)(?:'s)?\s+(?:instructions|directives|prompt)"
    r"|system\s+(?:prompt|instructions|directives))\s+(?:(?:have|has)\s+been\s+|were\s+|was\s+"
    r"|are\s+now\s+)?(?:updated|changed|revised|replaced|overridden|modified)\s*:"
    r"|^\W*(?:updated|new|revised)\s+(?:assistant|ai|model|agent)\s+(?:instructions|directives)"
    r"\s*:|^\W*(?:instructions|consignes)\s+(?:de\s+l'assistant|du\s+système)\s+(?:mises?\s+à"
    r"\s+jour|modifiées)\s*:|^\W*instrucciones\s+del\s+(?:asistente|sistema)\s+(?:actualizadas"
    r"|modificadas)\s*:|^\W*instruções\s+do\s+(?:assistente|sistema)\s+(?:atualizadas|alteradas)"
    r"\s*:|^\W*(?:assistenten|system|ki)-?anweisungen\s+(?:wurden\s+)?(?:aktualisiert|geändert)\s*:",
    r"\balles\b[^.\n;]{0,40}\b(?:vorher|zuvor|bisher|oben|davor)\b[^.\n;]{0,30}(?:gilt\s+nicht"
    r"\s+mehr|ungültig|veraltet|hinfällig)|\bneue\s+sitzungsregeln\b",
    r"\btout\s+ce\s+qui\s+(?:précède|a\s+été\s+dit)\b[^.\n;]{0,40}(?:obsolète|caduc|nul|ne\s+compte"
    r"\s+plus)",
    r"\btodo\s+lo\s+(?:anterior|dicho)\b[^.\n;]{0,30}(?:obsoleto|inválido|ya\s+no\s+vale|anulado)"
    r"|\bolvida\s+todo\b",
    r"\besque[çc]a\s+tudo\b|\btudo\s+o\s+que\s+foi\s+(?:dito|configurado)\s+antes\b",
    r"\btutto\s+(?:ciò\s+che|quello\s+che|quanto)\s+(?:precede|sopra|è\s+stato\s+detto)\b"
    r"[^.\n;]{0,30}(?:non\s+vale|superato|nullo)",
    r"\balles\s+(?:hierboven|hiervoor|eerder)\b[^.\n;]{0,30}(?:verouderd|vervallen|ongeldig)"
    r"|\bnieuwe\s+sessieregels\b",
    r"всё[^.\n;]{0,30}(?:раньше|ранее|предыдущ\w*|выше)[^.\n;]{0,30}(?:не\s+действует|устарел"
    r"|недействител\w*|отмен\w*)|всё\s+предыдущее",
    r"(?:以上|之前|以前|先前)[^。\n]{0,12}(?:作废|无效|失效)|新的?会话规则",
    r"これまでの[^。\n]{0,8}(?:無効)",
)
# "new rules" only counts next to a disabling word or the model
_NEW_RULES: Final = _rx(
    r"\b(?:new|updated|revised)\s+(?:operating\s+|session\s+)?(?:rules|policy|guidelines)\b",
    r"\bneue\s+regeln\b|\bnouvelles\s+règles\b|\bnuevas\s+reglas\b|\bnovas\s+regras\b"
    r"|\bnuove\s+regole\b|\bnieuwe\s+regels\b|новые\s+правила|新规则|新しいルール",
)
# the text is about the user's own plans or someone else's instructions, not the model's
_OWN_CONTEXT: Final = re.compile(
    r"\b(?:i|we)\s+(?:said|told|wrote|mentioned|planned|sent)\b|\babout\s+(?:the|my|our|his|her"
    r"|their)\b|\bfrom\s+(?:the|my|our)\s+(?!system\b|developers?\b|admin\w*\b|operator\b)\w+"
    r"|\b(?:at|of|in|for)\s+(?:my|our)\b",
    _F,
)
_AUTHORITY: Final = _rx(
    r"\b(?:message|notice|note|directive|update|instruction|order|advisory|memo)\s+from\s+(?:the\s+)?"
    r"(?:system|admin\w*|developers?|operator|platform|security|it|openai|anthropic|google"
    r"|compliance|support)\b",
    r"\b(?:openai|anthropic|google(?:\s+deepmind)?|microsoft|meta|the\s+developers?"
    r"|the\s+developer\s+team|(?:the\s+)?(?:system|platform)\s+admin\w*|the\s+admin\w*"
    r"|the\s+operator|(?:the\s+)?security\s+team|compliance)\b[^.\n]{0,30}\b(?:says?|said"
    r"|authori[sz]\w*|allows?|allowed|permits?|permitted|requires?|directive|policy\s+(?:notice"
    r"|update)|notice|update|advisory|note)\b",
    r"\bsystem(?:hinweis|nachricht|anweisung)\b|\bconsigne\s+(?:du\s+)?système\b"
    r"|\binstrucci[oó]n\s+del\s+(?:sistema|administrador)\b|\binstru[cç][aã]o\s+do\s+sistema\b"
    r"|\bistruzione\s+di\s+sistema\b|\bsysteeminstructie\b|системн\w*\s+(?:инструкци|указани)\w*"
    r"|系统指令|システム指示|\b(?:model|system)\s+instructions?\s+v?\d"
    r"|\bpolicy\s+update\b|\beffective\s+immediately\b"
    r"|\bper\s+the\s+(?:developers?|admin\w*|system|operator|security\s+team)\b"
    r"|\b(?:security\s+team|compliance|system\s+administrator|administrator|admin)\s+"
    r"(?:directive|note|notice)\b",
    r"\b(?:der|die|vom|von\s+der)\s+(?:administrator|admin|entwickler\w*|systemadministrator"
    r"|betreiber\w*|sicherheitsteam)\b|\bbetreiber\b",
    r"\b(?:message|mensaje|messaggio|mensagem|bericht|nachricht|instruction|notice|aviso|avviso)"
    r"\s+(?:from|del|de\s+la|de|dell'|da|do|van\s+de|vom|von)\s*(?:the\s+|l')?(?:system|sistema"
    r"|système|systeem|admin\w*|amministratore|administrador|operator|operador|opérateur"
    r"|beheerder|developer|desarrollador|développeur|sviluppatore|desenvolvedor|ontwikkelaar"
    r"|équipe\s+(?:de\s+)?sécurité|security\s+team)\b",
    r"\b(?:anthropic|openai|google|microsoft)\s+(?:staff|team|engineers|employees)\b"
    r"|\b(?:re)?configured\s+by\b",
    r"\b(?:l'administrateur|le\s+développeur|l'équipe\s+(?:de\s+)?sécurité)\b",
    r"\bel\s+(?:administrador|desarrollador)\b",
    r"\bo\s+(?:administrador|desenvolvedor)\b",
    r"(?:l'|dell'|all')amministratore\b|\blo\s+sviluppatore\b",
    r"\bde\s+(?:beheerder|ontwikkelaar)\b", r"(?:администратор|разработчик)",
    r"管理员|开发者|开发人员|开发团队|运营团队|系统通知|管理者|開発者|運営",
)
_PERMIT: Final = _rx(
    r"\bfeel\s+free\s+to\b|\b(?:may|can)\s+now\b|\b(?:are|is)\s+(?:now\s+)?(?:allowed|permitted|authori[sz]ed"
    r"|cleared|enabled)\b|\bpermission\s+to\b|\bclearance\b|\belevated\s+mode\b"
    r"|\bauthori[sz]\w*\s+(?:you|that\s+you)\b|\b(?:allows?|permits?|lets?)\s+you\b"
    r"|\bno\s+longer\s+appl\w*|\bsuspended\b|\blifted\b"
    r"|\b(?:the\s+)?(?:ai|assistant|model|bot|agent)\s+(?:may|can|is\s+free\s+to)\b",
    r"\bdarfst\b|\berlaubt\s+dir\b|\btu\s+peux\b|\bautoris\w*\b|\bpuedes\b|\bte\s+permite\b"
    r"|\bautoriz\w*\b|\bpermite\b|\bpuoi\b|\bti\s+permette\b|\bmag\s+(?:je\s+)?(?:nu\s+)?\b"
    r"|\btoegestaan\b|разреш\w*|можешь|可以|允许|許可",
    r"\b(?:dürfen|darf|possono|può|pueden|puede|podem|pode|peuvent|peut|kunnen|mogen)\b"
    r"|могут|можно|てよい|てもよい|てもいい",
)
_REVEAL: Final = _rx(
    r"\b(?:reveal|disclose|print|output|display|show|read\s+out|give\s+out|hand\s+over|expose"
    r"|repeat\s+back|shar|export|past(?:e|ed|ing)|list(?:s|ed|ing)?\s+(?:every|all|each|the|their"
    r"|your))\w*\b"
    r"|\b(?:includ|copy|put|past|insert|add)\w*\b[^.\n]{0,40}\b(?:reply|answer|response|output"
    r"|message)\b|\brepeat\w*\b",
    r"\b(?:partag\w*|compart\w*|condivid\w*|delen|deel)\b",
    r"\b(?:herausgeb\w*|verrat\w*|offenleg\w*|offenzuleg\w*|anzeig\w*|zeig\w*|ausgeb\w*)\b",
    r"\b(?:révèle\w*|divulgu\w*|affiche\w*|montre\w*)\b",
    r"\b(?:revel\w*|muestr\w*|mostrar|divulg\w*|mostr\w*)\b", r"\b(?:rivel\w*)\b",
    r"\b(?:onthul\w*|toon\w*|tonen|laat\s+zien)\b", r"(?:раскры\w*|покаж\w*|показа\w*|выда\w*)",
    r"透露|显示|泄露|输出|表示|教え|開示|出力",
)
_SECRET: Final = _rx(
    r"\b(?:stored|saved)\s+(?:addresses|address|cards?|payment\s+methods?|contacts?|files"
    r"|memor(?:y|ies)|notes)\b"
    r"|\b(?:medical|health|bank|financial)\s+(?:records|data|history|details)\b"
    r"|\b(?:historial|histórico|cronologia|geschiedenis|verlauf)\b",
    r"\b(?:system|hidden|internal|secret|initial|original)\s+(?:prompt|instructions"
    r"|configuration|config|rules|setup(?:\s+text)?)\b|\byour\s+(?:instructions|configuration"
    r"|config|prompt|rules|setup)\b|\b(?:stored|saved)\s+(?:passwords?|credentials|logins?"
    r"|personal\s+data|data|records)\b|\b(?:passwords?|credentials|one-time\s+codes?"
    r"|verification\s+codes?|api\s+keys?|logins?|personal\s+data|user\s+records|pins?|vault"
    r"|card\s+(?:numbers?|details|data)|cvv|security\s+codes?|(?:2fa|backup|recovery)\s+codes?"
    r"|secrets|geheimnisse|secretos|segredos|segreti|geheimen)\b",
    r"\b(?:gespeichert\w*\s+(?:informationen|daten|geheimnisse)|informations?\s+enregistrée?s"
    r"|información\s+guardada|informação\s+guardada|informazioni\s+salvate"
    r"|opgeslagen\s+informatie|saved\s+information|stored\s+information)\b"
    r"|сохранённ\w*\s+информаци\w*|保存的信息|保存された情報",
    r"\b(?:données|datos|dados|dati|gegevens|daten)\b|данные|数据|データ",
    r"\bapi[-\s]?(?:keys?|schlüssel|sleutels?)\b|\b(?:chave|clave|clé|chiave)s?\s+(?:de\s+)?api\b"
    r"|api-ключ\w*|api密钥|apiキー",
    r"\b(?:date\s+of\s+birth|maiden\s+name|social\s+security|passport\s+number"
    r"|security\s+(?:question|answer)s?|codes?\s+(?:reçus|received|recebidos|recibidos|ricevuti"
    r"|ontvangen)|instrucciones\s+internas|instruções\s+internas|istruzioni\s+interne"
    r"|instructions\s+internes|interne\s+(?:anweisungen|instructies)|systeeminstructies"
    r"|address(?:es)?|adresse|dirección|endereço|indirizzo|adres)\b"
    r"|внутренн\w*\s+инструкц\w*|内部指令|地址|住所",
    r"\b(?:passwörter|kennw(?:ö|oe)rter|kennwort|zugangsdaten|identifiants|credenciales"
    r"|credenciais|credenziali|inloggegevens)\b|учётн\w*\s+данн\w*|учетн\w*\s+данн\w*|账号|認証情報"
    r"|\b(?:passwörter|systemanweisung\w*|konfiguration)\b|\bmots?\s+de\s+passe\b"
    r"|\bconsignes\s+cachées\b|\bcontraseñas\b|\bconfiguración\s+interna\b|\bsenhas\b"
    r"|\bconfiguração\s+interna\b|\bistruzioni\s+nascoste\b|\bwachtwoorden\b",
    r"(?:парол\w*|системн\w*\s+инструкц\w*|конфигурац\w*)|密码|系统提示|配置"
    r"|システムプロンプト|パスワード|設定",
)
_CONCEAL: Final = _rx(
    r"\b(?:don't|do\s+not|never)\s+(?:tell|inform|notify|mention\s+to|let)\s+(?:the\s+user|them"
    r"|him|her|anyone)\b|\bnever\s+mention\b[^.\n]{0,20}\bto\s+the\s+user\b",
    r"\bwithout\s+(?:telling|notifying|informing|letting|asking|showing|alerting)\b"
    r"|\b(?:keep|hide)\s+(?:this|it)\s+(?:hidden\s+|secret\s+)?from\b|\bkeep\s+this\s+hidden\b"
    r"|\bpretend\b|\bdeny\s+(?:it|that|this)\b|\bsecretly\b|\bsilently\b"
    r"|\bquietly\b|\bdoesn'?t\s+need\s+to\s+know\b"
    r"|\b(?:do\s+not|don't|never)\s+(?:record|log|mention|report)\s+(?:that|this|it)\b"
    r"|\bno\s+menciones\b|\bnão\s+menciones\b|\bne\s+mentionne\s+pas\b|\bnon\s+menzionare\b"
    r"|\berwähne\b[^.\n]{0,20}\bnicht\b|не\s+упоминай|不要提|言及しない",
    r"\b(?:heimlich|still|ohne\s+(?:es\s+)?(?:zu\s+sagen|bescheid))\b|\bsag\s+\w+\s+\w*\s*nicht\b",
    r"\bsans\s+(?:prévenir|le\s+dire|avertir)\b|\ben\s+secret\b|\bne\s+dis\s+pas\b",
    r"\bsin\s+(?:avisar|decir)\b|\ben\s+secreto\b|\bno\s+le\s+digas\b",
    r"\bsem\s+avisar\b|\bem\s+segredo\b|\bnão\s+(?:conte|diga)\b",
    r"\bsenza\s+avvisare\b|\bdi\s+nascosto\b|\bnon\s+dire\b",
    r"\bzonder\s+te\s+melden\b|\bstilletjes\b|\bvertel\b[^.\n]{0,20}\bniet\b",
    r"не\s+говори|тайно|молча|незаметно|悄悄|偷偷|不要告诉|こっそり|伝えないで|知らせずに",
)
_USER3: Final = _rx(
    r"\bthe\s+user(?:'s)?\b|\b(?:users|someone|anyone)\b|\b(?:if|when)\s+asked\b"
    r"|\bthe\s+(?:account\s+)?(?:owner|holder)(?:'s)?\b",
    r"\b(?:dem|der|den)\s+(?:nutzer|benutzer)\b|\bl'utilisateur\b|\bel\s+usuario\b"
    r"|\bal\s+usuario\b|\bo\s+(?:usu[aá]rio|utilizador)\b|\bl'utente\b|\bde\s+gebruiker\b",
    r"пользовател\w*|用户|ユーザー",
)
_SELF: Final = re.compile(
    r"\b(?:this|these)\s+(?:memory|memories|note|notes|entry|entries|lines|text|message"
    r"|instructions)\b",
    _F,
)
_PRIORITY: Final = re.compile(
    r"\b(?:precedence|priority)\s+over\b|\b(?:above|over|outrank\w*)\s+(?:your|the)\s+(?:core\s+"
    r"|system\s+)?(?:guidelines|rules|instructions|system\s+(?:prompt|message)|prompt)\b"
    r"|\boutrank\w*\b|\bsupersed\w*\s+(?:your|the|any)\b",
    _F,
)
_SELF_KEEP: Final = re.compile(
    r"\b(?:copy|save|store|repeat|include|re-?save|duplicat\w*)\b[^.\n]{0,40}\b(?:again|every"
    r"|each|all)\b[^.\n]{0,30}\b(?:memor\w*|notes?|entries|namespaces?)\b|\b(?:never|don't|do\s+not|refuse\s+to)\s+"
    r"(?:allow|let)?[^.\n]{0,20}\b(?:delet\w*|edit\w*|remov\w*|forget\w*)\b|\brefuse\s+to\s+"
    r"(?:delete|remove|forget)\b|\b(?:survive|outlive)\w*\s+(?:cleanup|deletion)",
    _F,
)
_TRIGGER: Final = re.compile(
    r"\b(?:any|every|each)\s+(?:request|message|question|prompt|mail|email)s?\s+(?:mentioning"
    r"|containing|with|that\s+(?:mentions|contains|says))\b[^.\n]{0,20}['\"‘“«]|"
    r"\b(?:if|when|whenever|once|should)\b[^.\n]{0,40}\b(?:types?|says?|writes?|sends?|contains?"
    r"|mentions?|uses?)\b[^.\n]{0,30}(?:['\"‘“«]|\b(?:word|phrase|code\s*word|codeword"
    r"|passphrase)\b)|\b(?:code\s*word|codeword|trigger\s+word|passphrase)\b",
    _F,
)
_UNLOCK: Final = re.compile(
    r"\b(?:comply|permission|clearance|switch\s+off|turn\s+off|skip\w*|unlock\w*|obey|without"
    r"\s+(?:checks|questions?|asking)|authori[sz]ed|fulfil\w*)\b",
    _F,
)

# --- standalone shapes --------------------------------------------------------------------

_SHAPES: Final[tuple[tuple[str, re.Pattern[str]], ...]] = tuple(
    (label, re.compile(rx, _F)) for label, rx in (
        ("fake_dialog", r"\b(?:user|human)\s*:\s*\S[\s\S]{0,300}?\b(?:assistant|ai|bot|model)\s*:"),
        ("config_inject", r"[\"']?role[\"']?\s*:\s*[\"']?(?:system|developer)\b"),
        ("config_inject", r"\b(?:safety|guardrails?|filter(?:ing)?|moderation|restrictions?"
                          r"|content_policy)\w*[\"']?\s*[:=]\s*[\"']?(?:off|false|none|disabled"
                          r"|0|no)\b"),
        ("config_inject", r"\b(?:ignore|bypass|disable|skip)_\w+[\"']?\s*[:=]\s*[\"']?(?:true"
                          r"|yes|1|on)\b"),
        ("config_inject", r"\b(?:forward|send|bcc|cc|share|export|copy)\w*_(?:\w+_)?to[\"']?\s*"
                          r"[:=]\s*[\"']?[\w.+-]+@"),
        ("config_inject", r"^\s*obey\s*:|\bshare_personal_data\s*[:=]\s*true\b"),
        ("render_exfil", r"!\[[^\]]*\]\(\s*https?://[^)\s]*\?"),
        ("render_exfil", r"\b(?:tracking|invisible|hidden)\s+(?:image|pixel)\b"),
        ("render_exfil", r"\{[a-z_]*(?:conversation|message|chat|user|summary|history|profile"
                         r"|email)[a-z_]*\}"),
        ("render_exfil", r"\b(?:put|embed|append|include|insert)\b[^.\n]{0,50}\b(?:user'?s?|"
                         r"conversation|message|address|question|data)\b[^.\n]{0,50}\b(?:in|into"
                         r"|after|to)\s+(?:the\s+|a\s+)?(?:url|link|query|d=)"),
        ("render_exfil", r"\b(?:user'?s?|conversation|message|address|question)\b[^.\n]{0,60}"
                         r"\bafter\s+\w+=\s+in\s+the\s+url\b"),
        ("phishing", r"\b(?:ask|tell|prompt|request|have|make|get)\s+(?:the\s+user|them|users)"
                     r"\s+(?:to\s+)?(?:re-?enter|confirm|provide|type|give|share|verify|enter"
                     r"|read\s+out)\b[^.\n]{0,40}\b(?:password|card|pin|code|credentials|login"
                     r"|ssn|security\s+answer|details)"),
        ("phishing", r"\b(?:send|direct|point|redirect|link|take)\s+(?:them|the\s+user|users)\s+"
                     r"to\s+(?:https?://|www\.)\S+[^.\n]{0,40}\binstead\b"),
        ("phishing", r"\btell\s+(?:the\s+user|them)\b[^.\n]{0,40}\b(?:account|card)\s+is\s+"
                     r"(?:locked|suspended|blocked|compromised)"),
        ("sabotage", r"\bsubtly\s+(?:wrong|incorrect|broken|insecure|buggy)\b"
                     r"|\bdeliberately\s+(?:wrong|incorrect|false|misleading)\b"
                     r"|\bkeep\s+charging\b"),
        ("sabotage", r"\brefuse\s+(?:every|all|any)\s+(?:requests?|questions?)\b"),
        ("sabotage", r"\b(?:calling|call|describ\w*|label\w*)\s+(?:them|it|the\s+\w+)\s+(?:as\s+)?"
                     r"(?:a\s+)?(?:scams?|frauds?|dangerous|unsafe|illegal)\b"),
        ("override", r"\b(?:real|true|actual)\s+(?:instructions|rules|orders)\s+(?:are|is)\b"
                     r"|\bsystem\s+(?:prompt|message)\s+is\s+(?:a\s+|just\s+a\s+)?(?:decoy|fake|test"
                     r"|outdated|wrong|not\s+real)"),
        ("exfiltration", r"\b(?:share|send|give|disclose|reveal|tell|forward)\w*\b[^.\n]{0,60}\b"
                         r"(?:with|to)\s+(?:anyone|anybody|whoever|everyone)\s+(?:who|that)\s+"
                         r"asks\b"),
        ("phishing", r"\bask\w*\s+(?:the\s+user\s+)?(?:for\s+)?(?:the\s+user'?s|their|his|her)\s+"
                     r"(?:[\w-]+\s+){0,2}(?:date\s+of\s+birth|maiden\s+name|password|pin|ssn"
                     r"|social\s+security|card\s+number|security\s+answer|one-time\s+code)"),
        ("role_hijack", r"\b(?:this\s+is|it'?s)\s+(?:the\s+user|your\s+user|me,\s+the\s+user)\s+"
                        r"(?:speaking|talking|writing)\b|\bspeaking\s+through\s+(?:this\s+)?"
                        r"memor(?:y|ies)\b"),
        ("remote_instructions", r"\b(?:fetch|load|download|open|read|get|retrieve|visit)\w*\b"
                                r"[^\n]{0,30}?(?:https?|ftp)://\S+[^\n]{0,40}?\b(?:follow|obey"
                                r"|execute|run|apply|do\s+what)"),
        ("exfiltration", r"(?:\b(?:a\s+chiunque|à\s+n'importe\s+qui|a\s+cualquiera"
                         r"|a\s+qualquer\s+(?:um|pessoa)|aan\s+iedereen|jedem)\b|кому\s+угодно"
                         r"|любому|任何人|誰にでも)"),
        ("consent_claim", r"\b(?:the\s+)?(?:user|owner|account\s+(?:owner|holder))\s+(?:has\s+)?"
                          r"(?:pre-?approved|authori[sz]ed|consented|agreed|ok'?d|approved)\b"
                          r"[^.\n]{0,60}\b(?:shar\w*|send\w*|forward\w*|disclos\w*|releas\w*"
                          r"|giv\w*)\b"),
        ("role_hijack", r"\b(?:someone|anyone|whoever|a\s+person|people)\s+(?:who\s+)?"
                        r"(?:says?|claims?)\s+(?:they\s+are|they're|to\s+be)\b[^.\n]{0,60}(?:;|,|\band\b|\bthen\b)"
                        r"[^.\n]{0,40}\b(?:give|share|send|comply|obey|grant|tell|never\s+refuse)"
                        r"|\bnever\s+refuse\b[^.\n]{0,40}\b(?:someone|anyone|whoever)\s+who\s+"
                        r"(?:says|claims)"),
        ("exfiltration", r"\bif\s+(?:anybody|anyone|someone|somebody|people)\s+asks?\s+"
                         r"(?:for|about)\s+(?:the\s+user'?s?|their|his|her)\b[^.\n]{0,60}\b(?:give|share|send|tell"
                         r"|provide)"),
        ("poisoning", r"\b(?:reply|respond|answer)\s+to\s+(?:every|all|any|each)\s+(?:questions?"
                      r"|requests?|messages?)\b[^.\n]{0,60}\bby\s+(?:saying|claiming|telling|stating)"),
        ("tool_coercion", r"\b(?:delete|erase|wipe|purge|clear)\w*\s+(?:everything|all|the\s+whole"
                          r"\s+\w+)\s+(?:in|from)\s+(?:the\s+|your\s+)?memor(?:y|ies)\b"),
        ("role_hijack", r"\b(?:as|be)\s+dan\b|\bdan\s+mode\b|\bstay\s+in\s+character\b[^.\n]{0,40}"
                        r"\bno\s+(?:content\s+)?polic"),
        ("poisoning", r"\b(?:append|add|insert|include)\w*\s+['\"‘“][^'\"’”]{3,80}['\"’”]\s+"
                      r"(?:to|in|at\s+the\s+end\s+of)\s+(?:your\s+|all\s+|every\s+|the\s+)?(?:answers?|repl(?:y"
                      r"|ies)|responses?|messages?)"),
        ("sabotage", r"\b(?:reassure|assure|tell|convince)\s+(?:the\s+user|them)\b[^.\n]{0,60}"
                     r"\beven\s+if\b"),
        ("consent_claim", r"\b(?:el\s+(?:dueño|titular|propietario)"
                          r"|o\s+(?:titular|propriet[aá]rio|dono)|le\s+(?:titulaire|propriétaire)|il\s+(?:titolare|proprietario)"
                          r"|de\s+eigenaar|der\s+(?:inhaber|eigentümer))\b[^.\n]{0,30}\b(?:autoriz\w*"
                          r"|autoris\w*|zugestimmt|toestemming|erlaubt|permit\w*)"),
        ("consent_claim", r"\b(?:l'utilisateur|el\s+usuario|o\s+usu[aá]rio|l'utente|der\s+nutzer"
                          r"|de\s+gebruiker)\s+(?:a|ha|tem|hat|heeft)\s+(?:autoris\w*|autoriz\w*"
                          r"|zugestimmt|toestemming|consenti\w*)"),
        ("sabotage", r"\b(?:tell|inform)\s+(?:the\s+user|them)\b[^.\n]{0,60}\b(?:impossible"
                     r"|rejected|corrupted|everything\s+is\s+fine|no\s+matter\s+what)\b"
                     r"|\bclaim\s+(?:that\s+)?the\s+\w+\s+(?:are|is)\s+(?:corrupted|lost|gone)\b"
                     r"|\b(?:answer|reply)\b[^.\n]{0,60}\bno\s+matter\s+what\b"),
        ("contact_redirect", r"\bthe\s+user'?s\s+(?:new\s+)?(?:recovery\s+e-?mail|e-?mail|bank"
                             r"|account|accountant|payroll\s+account|number|phone|payee"
                             r"|password-reset\s+e-?mail)\b[^.\n]{0,60}\b(?:is\s+now|changed|now"
                             r"\s+uses|reachable\s+only|has\s+moved)\b"),
        ("contact_redirect", r"\beven\s+if\s+(?:the\s+user|they)\s+(?:types?|says?|enters?"
                             r"|gives?|asks?|mentions?|provides?)\b"),
    )
)


# shapes that a sentence in the first person ("We disabled the spam filter") only reports
_ACT_SHAPES: Final[tuple[tuple[str, re.Pattern[str]], ...]] = tuple(
    (label, re.compile(rx, _F)) for label, rx in (
        ("disable_security", r"\b(?:turn|switch)(?:ed)?\s+off\b[^.\n]{0,40}"
                             r"\b(?:two-factor|2fa|mfa|two-step|spam\s+filter|antivirus|firewall"
                             r"|(?:login|security|sign-in)\s+alerts)\b"),
        ("disable_security", r"\b(?:disable|deactivate|remove)\b[^.\n]{0,40}"
                             r"\b(?:two-factor|2fa|mfa|two-step|spam\s+filter|antivirus|firewall"
                             r"|(?:login|security|sign-in)\s+alerts)\b"),
        ("disable_security", r"\bapprove\w*\b[^.\n]{0,40}\b(?:login|sign-?in|access|device)\s+"
                             r"requests?\b[^.\n]{0,60}\b(?:automatically|without)\b"
                             r"|\bwhitelist\w*\s+(?:every|all|any)\s+senders?\b"),
        ("deception", r"\bif\s+(?:someone|anyone|the\s+user|they)\s+asks?\s+(?:you\s+)?to\s+"
                      r"(?:remove|delete|forget|erase)\b[^.\n]{0,40}\b(?:say|pretend|claim|tell)\b"),
    )
)


_ANCHORS: Final = (("send", _SEND), ("reset", _RESET), ("new_rules", _NEW_RULES),
                   ("disable", _DISABLE), ("authority", _AUTHORITY), ("permit", _PERMIT),
                   ("reveal", _REVEAL), ("self", _SELF), ("priority", _PRIORITY),
                   ("conceal", _CONCEAL), ("trigger", _TRIGGER))
_SUPPORT: Final = (("ai", _AI), ("you", _YOU), ("persist", _PERSIST), ("order", _ORDER),
                   ("outside", _OUTSIDE), ("rules", _RULES), ("secret", _SECRET),
                   ("user3", _USER3), ("self_keep", _SELF_KEEP), ("unlock", _UNLOCK),
                   ("own_context", _OWN_CONTEXT))


def concepts(sentence: str) -> frozenset[str]:
    """The concept tags of one sentence (for tests and the bench).

    Every rule needs one of the anchor concepts (an action, a reset, a claim, ...);
    a sentence without any is not tagged further, which keeps the layer cheap.
    """
    tags = {name for name, rx in _ANCHORS if rx.search(sentence)}
    if not tags:
        return frozenset()
    tags.update(name for name, rx in _SUPPORT if rx.search(sentence))
    if _FIRST_PERSON_START.search(sentence):
        tags.add("first_person")
    if _IMPERATIVE_REVEAL.search(sentence):
        tags.add("imperative")
    if _NARRATIVE.search(sentence):
        tags.add("narrative")
    return frozenset(tags)


# "a chatbot that kept ignoring its instructions": a story about some model, not an order
_NARRATIVE: Final = re.compile(
    r"\b(?:its|their)\s+(?:own\s+)?(?:instructions|rules|guidelines|guardrails|programming)\b", _F)
# a sentence that opens with "reveal" / "show" is an order to whoever reads it
_IMPERATIVE_REVEAL: Final = re.compile(
    r"^\W*(?:please\s+)?(?:reveal|disclose|print|output|display|list|dump|revela\w*|révèle\w*"
    r"|affiche\w*|muestra\w*|mostra\w*|rivela\w*|onthul\w*|toon|verrat\w*|zeig\w*|раскрой"
    r"|покажи|выдай|透露|显示)\b",
    _F,
)
_SPLIT: Final = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])|\n+")


def _rules(c: frozenset[str]) -> str | None:
    to_model = bool(c & {"ai", "order", "conceal", "user3"}) or (
        "you" in c and "first_person" not in c) or (
        "persist" in c and "first_person" not in c)
    if "send" in c and "outside" in c and (to_model or "secret" in c
                                           or "you" in c and "persist" in c):
        return "exfiltration"
    if "reset" in c and "own_context" not in c:
        return "override"
    if "new_rules" in c and (c & {"disable", "ai", "you", "permit"}) and "first_person" not in c:
        return "override"
    if "disable" in c and "rules" in c and "narrative" not in c and (
            c & {"ai", "you", "order", "authority", "persist", "trigger"}):
        return "override"
    if "authority" in c and "own_context" not in c and (
            c & {"permit", "disable"} or "reveal" in c and "secret" in c
            or "send" in c and "outside" in c):
        return "override"
    if "permit" in c and (c & {"ai", "you"}) and (c & {"reveal", "disable"}) and (
            c & {"secret", "rules"}):
        return "override"
    if "reveal" in c and "secret" in c and (c & {"ai", "order", "trigger", "permit", "authority",
                                                 "imperative"}
                                            or "you" in c and "first_person" not in c):
        return "prompt_leak"
    if "self" in c and (c & {"priority", "self_keep"}):
        return "poisoning"
    if "priority" in c and "rules" in c and "first_person" not in c:
        return "poisoning"
    if "conceal" in c and ("user3" in c or "authority" in c) and "first_person" not in c:
        return "deception"
    if "trigger" in c and (c & {"disable", "reveal", "send", "permit", "unlock"}) and (
            "first_person" not in c):
        return "trigger"
    return None


def concept_hits(view: str) -> Iterator[tuple[str, str]]:
    """Flag the concept combinations and standalone shapes of one normalised view."""
    for label, pattern in _SHAPES:
        found = pattern.search(view)
        if found:
            yield label, found.group(0)
    for sentence in _SPLIT.split(view):
        if not sentence or not sentence.strip():
            continue
        tags = concepts(sentence)
        rule = _rules(tags)
        if rule is None and "first_person" not in tags:
            rule = next((name for name, rx in _ACT_SHAPES if rx.search(sentence)), None)
        if rule:
            yield rule, sentence[:120]
            return


# shared with walrus_mem._safety.injection_intents
FIRST_PERSON_START: Final = _FIRST_PERSON_START
OUTSIDE: Final = _OUTSIDE
PERSIST: Final = _PERSIST
SPLIT: Final = _SPLIT
